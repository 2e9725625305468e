#!/usr/bin/env bash
# serve-embedder with more slow clients than connection threads (300 against server.max_connections 256): every
# valid request of 1,000 mixed ones is still answered, bodies over the limit and malformed chunked bodies are refused,
# no log holds a key (tests/fuzz/serve_load.sh at CI size; results/fuzzing.md runs it with 1,000 clients). Before
# connections waited for their request head without a thread, 256 slow clients held every thread.
set -euo pipefail
BUILD=${1:-build}
SRC=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
source "$SRC/tests/support/e2e_common.sh"
# Bounded: with starved threads the attack phase does not end (bea3d59's server had printed nothing after 60 s).
out=$(timeout 120 bash "$SRC/tests/fuzz/serve_load.sh" "$BUILD" 300 1000 2>&1) ||
  { echo "$out"; fail "serve_load.sh failed or did not finish in 120 s"; }
echo "$out"
grep -q "^| attack: 1000 mixed + 100 over-limit/chunked, 300 slow clients | 1100 | 0 |" <<<"$out" ||
  fail "the attack phase did not hold 300 slow clients with 0 errors"
grep -q "^slow clients: 300 connected of 300" <<<"$out" || fail "not every slow client connected"
echo ok
