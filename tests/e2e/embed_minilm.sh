#!/usr/bin/env bash
# `daei embed --config configs/quickstart.yaml --text ... --json` prints all-MiniLM-L6-v2's embedding of the text (the
# asset cache's folder, through daei's BERT) equal to sentence-transformers' own (tests/fixtures/minilm: 5.1.2 on the
# same torch) within 1e-5, and its noisy answer at the quickstart's σ.
set -uo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
rc=0
for row in 1 3 500; do
  text=$(/usr/bin/python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).readlines()[int(sys.argv[2])])["text"])' \
         "$SRC/tests/fixtures/minilm/texts.jsonl" "$row")
  "$BUILD/daei" embed --config "$SRC/configs/quickstart.yaml" --noise-seed 1 --text "$text" --json >out.json 2>err.txt ||
    { echo "FAIL: daei embed exited $?: $(tail -1 err.txt)"; rc=1; continue; }
  /usr/bin/python3 - out.json "$SRC/tests/fixtures/minilm/embeddings.safetensors" "$((row - 1))" <<'PY' || rc=1
import json, math, struct, sys
j = json.loads(open(sys.argv[1]).read())
raw = open(sys.argv[2], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
t = head["embeddings"]
rows, dim = t["shape"]
i = int(sys.argv[3])
a, _ = t["data_offsets"]
want = struct.unpack("<%df" % dim, raw[8 + n + a + 4 * dim * i: 8 + n + a + 4 * dim * (i + 1)])
got = j["clean"]
diff = max(abs(x - y) for x, y in zip(got, want))
if len(got) != dim or diff > 1e-5:
    print("FAIL: row %d: dim %d (want %d), max |daei - sentence-transformers| %.3g" % (i, len(got), dim, diff)); sys.exit(1)
cos = sum(x * y for x, y in zip(got, j["noisy"])) / math.sqrt(sum(y * y for y in j["noisy"]))
if abs(j["sigma"] - 0.18) > 1e-12 or not 0.1 < cos < 0.5:
    print("FAIL: row %d: sigma %s, cos(noisy, clean) %.3f" % (i, j["sigma"], cos)); sys.exit(1)
print("row %d: dim %d, max |daei - sentence-transformers| %.2g, noisy at sigma %.2f: cos %.3f" % (i, dim, diff, j["sigma"], cos))
PY
done
exit $rc
