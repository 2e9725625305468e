#!/usr/bin/env bash
# Issue 5 end to end: GloVe conversion of the fixture, `daei embed`, and σ̂ through `daei serve-embedder`
# (127.0.0.1 only; every wait is bounded).
set -euo pipefail
BUILD=$(cd "$1" && pwd); SRC=$(cd "$2" && pwd)
DAEI="$BUILD/daei"
TMP=$(mktemp -d /tmp/daei-e2e-embed.XXXXXX)
SERVER_PID=""
cleanup() { [[ -n "$SERVER_PID" ]] && kill "$SERVER_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
cd "$TMP"

echo "== converter: fixture JSON -> safetensors + vocab identical to the committed conversion"
python3 "$SRC/launch/convert_glove.py" "$SRC/tests/fixtures/glove/mini.json" "$TMP/mini" >/dev/null
for f in vectors.safetensors vocab.txt asset.json; do cmp "$TMP/mini/$f" "$SRC/tests/fixtures/glove/mini/$f"; done

ASSETS="${DAEI_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/daei}"
if [[ -f "$ASSETS/glove-100d/asset.json" ]]; then
  CFG=(--config "$SRC/configs/quickstart.yaml"); DIM=100; REPEATS=20
else
  echo "(GloVe 100-d not converted: using the 4-d fixture)"
  CFG=(--config "$SRC/configs/quickstart.yaml" --set "embedder.glove_dir=$SRC/tests/fixtures/glove/mini"); DIM=4; REPEATS=400
fi

echo "== daei embed --json"
"$DAEI" embed "${CFG[@]}" --text "the cat sat on the mat" --json >embed.json
python3 - "$DIM" <<'PY'
import json, math, sys
dim = int(sys.argv[1])
j = json.loads(open("embed.json").read())
c, y = j["clean"], j["noisy"]
assert len(c) == dim and len(y) == dim, (len(c), len(y))
assert abs(math.sqrt(sum(x * x for x in c)) - 1) < 1e-5
assert c != y
print(f"clean |x| = {math.sqrt(sum(x*x for x in c)):.6f}, noisy differs, dim {dim}")
PY
# same text, same query key: the same noisy vector again
"$DAEI" embed "${CFG[@]}" --text "the cat sat on the mat" --json | cmp - embed.json
[[ ! -d runs ]] || { echo "embed created a run directory"; exit 1; }

echo "== serve-embedder + estimate-sigma over loopback"
: >server.out  # exists before the server's shell opens it: the loop below may read it first
"$DAEI" serve-embedder "${CFG[@]}" --port 0 >server.out 2>server.err &
SERVER_PID=$!
PORT=""
for _ in $(seq 1 600); do
  PORT=$(sed -n 's#^listening http://127.0.0.1:\([0-9]*\)$#\1#p' server.out || true)
  [[ -n "$PORT" ]] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat server.err; exit 1; }
  sleep 0.1
done
[[ -n "$PORT" ]] || { echo "server did not start"; cat server.err; exit 1; }
"$DAEI" estimate-sigma "${CFG[@]}" --set embedder.kind=http --set "embedder.url=http://127.0.0.1:$PORT" \
  --repeats "$REPEATS" --json >sigma.json
cat sigma.json
python3 - <<'PY'
import json
j = json.loads(open("sigma.json").read())
rel = abs(j["sigma_hat"] - 0.04) / 0.04
assert rel < 0.05, f"sigma_hat {j['sigma_hat']} is {100*rel:.1f}% off 0.04"
assert rel < 3 * j["rel_se"] + 1e-12, f"{rel} > 3 s.e. {j['rel_se']}"
print(f"sigma_hat {j['sigma_hat']:.5f}: {100*rel:.2f}% from 0.04 (3 s.e. = {300*j['rel_se']:.2f}%)")
PY
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; SERVER_PID=""

echo "== bad input: a wrong key, an unreachable service"
if "$DAEI" estimate-sigma "${CFG[@]}" --set embedder.kind=http --set embedder.url=http://127.0.0.1:1 \
     --set embedder.retries=0 --set embedder.timeout_s=2.0 2>err.txt; then exit 1; fi
grep -q "embedding service http://127.0.0.1:1 failed after 1 attempts" err.txt || { cat err.txt; exit 1; }
echo "ok"
