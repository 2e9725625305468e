#!/usr/bin/env bash
# serve-embedder under hostile clients, on loopback and bounded (a few minutes): starts `daei serve-embedder` on
# the tiny GloVe fixture with an API key and a fixed noise key, then runs tests/fuzz/serve_load.py (slow clients,
# bodies over the limit, malformed chunked bodies, 10,000 mixed requests) and checks that no log holds either key.
#   tests/fuzz/serve_load.sh [BUILD] [SLOW_CLIENTS] [REQUESTS] [HOLD_S]      (build, 1000, 10000, 0)
# HOLD_S > 0 keeps the slow clients going that many seconds more (past server.request_timeout_s, 30 s) while one
# valid request goes out every 0.1 s.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
SLOW=${2:-1000} REQS=${3:-10000} HOLD=${4:-0}
for v in "$SLOW" "$REQS" "$HOLD"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "serve_load.sh: SLOW_CLIENTS, REQUESTS and HOLD_S are whole numbers, got '$v'"; exit 2; }
done
T=$(mktemp -d /tmp/daei-serve-load.XXXXXX)
PID=""
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
# Each slow client holds one descriptor here and one in the server (same ulimit): cap them to what is left.
fds=$(ulimit -n)
((SLOW > fds - 200)) && { echo "slow clients capped from $SLOW to $((fds - 200)) by ulimit -n $fds"; SLOW=$((fds - 200)); }
# Slow clients hold no connection thread (they wait for their request head in the server's reactor): all SLOW of
# them run beside the valid requests. Before that, 1,000 of them held all 256 threads (results/fuzzing.md).
export DAEI_LOAD_KEY=load-api-key-7f3a9c
NOISE_KEY="load-noise-key-3b8e1d-0123456789abcdef0123456789abcdef"
printf '%s\n' "$NOISE_KEY" >"$T/noise.key"
"$BUILD/daei" serve-embedder --set "embedder.glove_dir=$SRC/tests/fixtures/glove/mini" \
  --set server.api_key_env=DAEI_LOAD_KEY --set server.noise_key_file="$T/noise.key" \
  --set server.max_body_bytes=65536 --port 0 >"$T/server.out" 2>"$T/server.err" &
PID=$!
PORT=""
for _ in $(seq 1 300); do
  PORT=$(sed -n 's#^listening http://127.0.0.1:\([0-9]*\)$#\1#p' "$T/server.out" || true)
  [[ -n $PORT ]] && break
  kill -0 "$PID" 2>/dev/null || { cat "$T/server.err"; echo "FAIL: server exited"; exit 1; }
  sleep 0.1
done
[[ -n $PORT ]] || { echo "FAIL: server did not start"; exit 1; }
echo "server pid $PID port $PORT; $SLOW slow clients, $REQS mixed requests"
rc=0
python3 "$SRC/tests/fuzz/serve_load.py" "$PORT" "$PID" "$SLOW" "$REQS" "$DAEI_LOAD_KEY" "$HOLD" || rc=$?
kill -0 "$PID" 2>/dev/null || { echo "FAIL: the server died under load"; rc=1; }
for k in "$DAEI_LOAD_KEY" "$NOISE_KEY" "noise-key-3b8e1d"; do
  if grep -qF -- "$k" "$T/server.out" "$T/server.err"; then echo "FAIL: a server log holds a key ($k)"; rc=1; fi
done
echo "server log: $(wc -l <"$T/server.err") lines, no key in it: $([[ $rc == 0 ]] && echo yes || echo see above)"
exit $rc
