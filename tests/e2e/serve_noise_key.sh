#!/usr/bin/env bash
# Issue 32: the defender's service adds noise that nobody can predict. Two fresh `serve-embedder` processes with the
# default config answer the same first query differently; with --noise-seed they answer it identically and warn;
# server.noise_mode per_text answers one text identically twice and two texts differently; `daei embed` follows the
# same rules; the secret key appears in no log and no file.
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$(cd "$1" && pwd); SRC=$(cd "$2" && pwd)
D=$BUILD/daei
T=$(mktemp -d /tmp/daei-e2e-noisekey.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
cd "$T"
mkdir home && export HOME=$T/home XDG_CACHE_HOME=$T/home/.cache TMPDIR=$T/tmp && mkdir -p "$TMPDIR"
cfg=(--set "embedder.glove_dir=$SRC/tests/fixtures/glove/mini" --set embedder.sigma=0.5)

# serve NAME [args...]: starts a server, waits for its port (bounded), sets PORT.
serve() {
  local name=$1; shift
  : >"$name.out"
  "$D" serve-embedder "${cfg[@]}" --port 0 "$@" >"$name.out" 2>"$name.err" &
  PIDS+=($!)
  PORT=""
  for _ in $(seq 1 300); do
    PORT=$(sed -n 's#^listening http://127.0.0.1:\([0-9]*\)$#\1#p' "$name.out")
    [[ -n $PORT ]] && return 0
    kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$name.err"; fail "$name exited"; }
    sleep 0.1
  done
  fail "$name did not start"
}
# ask PORT TEXT...: the answers' vectors, one JSON array a line.
ask() {
  local port=$1; shift
  python3 - "$port" "$@" <<'PY'
import json, sys, urllib.request
body = json.dumps({"input": sys.argv[2:], "model": "daei"}).encode()
r = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/embeddings", body,
                                                  {"Content-Type": "application/json"}), timeout=20)
for d in json.load(r)["data"]:
    print(json.dumps(d["embedding"]))
PY
}
stop_all() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; PIDS=(); }

echo "== default: a secret key per start, fresh noise per query"
serve a; a1=$(ask "$PORT" "the cat sat"); a2=$(ask "$PORT" "the cat sat")
serve b; b1=$(ask "$PORT" "the cat sat")
[[ $a1 != "$b1" ]] || fail "two fresh servers gave the same noisy answer to the same first query"
[[ $a1 != "$a2" ]] || fail "fresh mode answered one text twice with the same noise"
grep -q "noise fresh .*key secret (OS random" a.err || { cat a.err; fail "the key's origin is not logged"; }
if grep -q "] W \[" a.err; then cat a.err; fail "a warning without a fixed key"; fi
stop_all

echo "== --noise-seed: reproducible, and a warning"
serve c --noise-seed 42; c1=$(ask "$PORT" "the cat sat")
serve d --noise-seed 42; d1=$(ask "$PORT" "the cat sat")
[[ $c1 == "$d1" ]] || fail "two servers with --noise-seed 42 differ"
grep -q "] W \[release\] the noise key is fixed (--noise-seed).*subtract it" c.err || { cat c.err; fail "no warning for a fixed key"; }
printf 'a defender key file, 32+ bytes long\n' >key.bin
serve e --set server.noise_key_file="$T/key.bin"; e1=$(ask "$PORT" "the cat sat")
grep -q "] W \[release\] the noise key is fixed (key file" e.err || { cat e.err; fail "no warning for a key file"; }
[[ $e1 != "$c1" ]] || fail "key file and seed gave the same noise"
stop_all

echo "== per_text: one text always the same, two texts different"
serve f --set server.noise_mode=per_text
mapfile -t f1 < <(ask "$PORT" "the cat sat" "the dog sat" "the cat sat")
f2=$(ask "$PORT" "the cat sat")
[[ ${f1[0]} == "${f1[2]}" && ${f1[0]} == "$f2" ]] || fail "per_text: one text answered differently"
[[ ${f1[0]} != "${f1[1]}" ]] || fail "per_text: two texts answered alike"
serve g --set server.noise_mode=per_text; g1=$(ask "$PORT" "the cat sat")
[[ $g1 != "$f2" ]] || fail "per_text: two servers (two secret keys) gave the same noise"
stop_all

echo "== daei embed: the same rules"
e_a=$("$D" embed "${cfg[@]}" --text "the cat sat" --json 2>embed.err); e_b=$("$D" embed "${cfg[@]}" --text "the cat sat" --json 2>>embed.err)
[[ $e_a != "$e_b" ]] || fail "daei embed: two runs gave the same noise"
s_a=$("$D" embed "${cfg[@]}" --noise-seed 3 --text "the cat sat" --json 2>>embed.err)
s_b=$("$D" embed "${cfg[@]}" --noise-seed 3 --text "the cat sat" --json 2>>embed.err)
[[ $s_a == "$s_b" ]] || fail "daei embed --noise-seed 3: two runs differ"
python3 - "$("$D" embed "${cfg[@]}" --set server.noise_mode=per_text --text "the cat sat" --text "the cat sat" --json 2>>embed.err)" <<'PY'
import json, sys
rows = [json.loads(l) for l in sys.argv[1].splitlines()]
assert rows[0]["noisy"] == rows[1]["noisy"] and rows[0]["noisy"] != rows[0]["clean"], rows
PY

echo "== the secret is in no log and no file"
# A 256-bit key written out would be 64 hex digits or 43+ base64 characters; no log line holds such a run. The
# paths the test itself passes (build, source and temporary directories) are taken out first: a deep checkout's path
# is a long run of letters and slashes (CI's /check/work/main/tests/fixtures/glove/mini matched).
if sed -e "s#$BUILD##g" -e "s#$SRC##g" -e "s#$T##g" ./*.err | grep -aE '[0-9a-fA-F]{32,}|[A-Za-z0-9+/]{40,}'; then
  fail "a key-like string in a log"
fi
left=$(find "$T/home" "$TMPDIR" -type f)
[[ -z $left ]] || fail "files written: $left"
echo "ok"
