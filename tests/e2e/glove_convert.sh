#!/usr/bin/env bash
# launch/convert_glove.py on word-vector text: GloVe's `word v1 ... vd` lines, word2vec/fastText .vec text (a `V d`
# header, detected and skipped), the same gzipped, from standard input, and a zip of several files (--member). Each
# converted folder loads as `embedder.kind: glove` and `daei embed` (σ 0) gives the L2-normalised mean of the words'
# vectors, computed here from the text. A repeated word keeps its first vector and is counted. Malformed input
# (another number of values, a value that is not a finite number, a header that does not match, a zip without
# --member) stops with exit 1 and one error line, no traceback, and writes no folder.
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$(cd "$1" && pwd); SRC=$(cd "$2" && pwd)
D=$BUILD/daei
CONV=("/usr/bin/python3" "$SRC/launch/convert_glove.py")
e2e_tmp
cd "$T"

# 7 words x 5 values; "fox" appears twice (the second vector must be ignored).
cat >g.txt <<'EOF'
the 0.418 0.24968 -0.41242 0.1217 0.34527
quick -0.5 1.25e-1 0.75 -0.0625 2
brown 0.1 0.2 0.3 0.4 0.5
fox 1 -1 1 -1 0.5
jumps -0.9 0.05 0.333333 0.6 -0.2
over 0.01 -0.02 0.03 -0.04 0.05
fox 9 9 9 9 9
dog 0.7 0.7 -0.7 0.1 0.0
EOF
{ echo "7 5"; grep -v '^fox 9' g.txt | sed 's/$/ /'; } >w2v.vec  # the header's 7 words; fastText's trailing spaces
gzip -c g.txt >g.txt.gz
printf 'a 1 2\nb 3 4\n' >other.txt
/usr/bin/python3 - <<'PY'
import zipfile
with zipfile.ZipFile("two.zip", "w", zipfile.ZIP_DEFLATED) as z:
    z.write("other.txt", "vecs/glove.tiny.2d.txt")
    z.write("g.txt", "vecs/glove.tiny.5d.txt")
PY

out=$("${CONV[@]}" g.txt out-txt) || fail "plain GloVe text: exit $?"
[[ $out == *"7 words x 5"* && $out == *"1 repeated word"* ]] || fail "plain GloVe text: summary says: $out"
"${CONV[@]}" w2v.vec out-vec >/dev/null || fail "word2vec text with header: exit $?"
"${CONV[@]}" g.txt.gz out-gz >/dev/null || fail "gzipped GloVe text: exit $?"
"${CONV[@]}" - out-stdin <g.txt.gz >/dev/null || fail "gzip on standard input: exit $?"
"${CONV[@]}" --member glove.tiny.5d.txt two.zip out-zip >/dev/null || fail "zip --member: exit $?"

/usr/bin/python3 - <<'PY' || fail "converted folder's layout"
import json, struct
a = json.load(open("out-txt/asset.json"))
assert a["rows"] == 7 and a["dim"] == 5, a
words = open("out-txt/vocab.txt", "rb").read().split(b"\n")
assert words == [b"the", b"quick", b"brown", b"fox", b"jumps", b"over", b"dog", b""], words
blob = open("out-txt/vectors.safetensors", "rb").read()
n = struct.unpack("<Q", blob[:8])[0]
h = json.loads(blob[8:8 + n])
assert h["vectors"] == {"dtype": "F32", "shape": [7, 5], "data_offsets": [0, 140]}, h
assert len(blob) == 8 + n + 140
assert struct.unpack("<5f", blob[8 + n + 3 * 20:8 + n + 4 * 20]) == (1, -1, 1, -1, 0.5)  # fox: the first vector
PY
# the same vectors whatever the container: identical files
for o in out-vec out-gz out-stdin out-zip; do
  for f in vectors.safetensors vocab.txt; do cmp -s "out-txt/$f" "$o/$f" || fail "$o/$f differs from out-txt/$f"; done
done

TEXT="The quick brown fox jumps over the lazy dog."
/usr/bin/python3 - "$TEXT" >want.json <<'PY'
import json, math, struct, sys
vec = {}
for line in open("g.txt"):
    p = line.split()
    vec.setdefault(p[0], [struct.unpack("f", struct.pack("f", float(x)))[0] for x in p[1:]])
words = [w for w in sys.argv[1].lower().replace(".", " .").split() if w in vec]  # "lazy", "." unknown
assert words == ["the", "quick", "brown", "fox", "jumps", "over", "the", "dog"], words
s = [sum(vec[w][k] for w in words) / len(words) for k in range(5)]
n = math.sqrt(sum(x * x for x in s))
print(json.dumps([x / n for x in s]))
PY
for o in out-txt out-vec; do  # (out-gz, out-stdin, out-zip: the same files as out-txt, above)
  "$D" embed --set embedder.kind=glove --set "embedder.glove_dir=$T/$o" --set embedder.sigma=0 --text "$TEXT" \
    --json >"$o.json" 2>"$o.log" || { cat "$o.log"; fail "daei embed on $o: exit $?"; }
  /usr/bin/python3 - "$o.json" <<'PY' || fail "daei embed on $o: not the normalised mean of the word vectors"
import json, sys
got = json.load(open(sys.argv[1]))
want = json.load(open("want.json"))
assert got["embedder"].startswith("glove-5d@"), got["embedder"]
assert len(got["clean"]) == 5 and all(abs(a - b) < 1e-6 for a, b in zip(got["clean"], want)), (got["clean"], want)
PY
done

# Malformed input: exit 1, one line on stderr naming the problem, nothing on stdout, no folder written.
bad() {  # NAME PATTERN ARGS...
  local name=$1 pat=$2 rc=0 err
  shift 2
  err=$("${CONV[@]}" "$@" 2>&1 >stdout.txt) || rc=$?
  [[ $rc -eq 1 ]] || fail "$name: exit $rc, expected 1 ($err)"
  [[ $(printf '%s\n' "$err" | wc -l) -eq 1 && $err == "convert_glove: error: "* ]] || fail "$name: not one error line: $err"
  [[ $err == *"$pat"* ]] || fail "$name: error does not say '$pat': $err"
  [[ ! -s stdout.txt ]] || fail "$name: wrote to stdout"
  [[ ! -e "${*: -1}" ]] || fail "$name: wrote ${*: -1}"
  [[ -z $(find . -maxdepth 1 -name '.convert_glove.*') ]] || fail "$name: left a temporary folder"
}
printf 'a 1 2 3\nb 1 2\n' >short.txt;         bad "a short line" "short.txt:2: 2 values for 'b', expected 3" short.txt o1
printf 'a 1 2\nb 1 2 3\n' >long.txt;          bad "a long line" "long.txt:2: 3 values" long.txt o2
printf 'a 1 2\nb 1 x2\n' >nan.txt;            bad "a non-numeric value" "'x2' of 'b' is not a number" nan.txt o3
printf 'a 1 2\nb 1 nan\n' >nan2.txt;          bad "a NaN" "not finite" nan2.txt o4
printf 'a 1 2\nb 1 1e39\n' >big.txt;          bad "beyond float32" "not finite" big.txt o5
printf '3 2\na 1 2\nb 3 4\n' >hdr.vec;        bad "a header of more words" "header says 3 words, the file has 2" hdr.vec o6
printf '2 3\na 1 2\nb 3 4\n' >hdr2.vec;       bad "a header of another d" "expected 3" hdr2.vec o7
bad "a zip of two files without --member" "holds 2 files" two.zip o8
bad "--member not in the zip" "no member named 'nope.txt'" --member nope.txt two.zip o9
bad "a missing file" "cannot open" missing.txt o10
head -c 40 g.txt.gz >cut.gz;                  bad "a truncated gzip" "failed at line" cut.gz o11
: >empty.txt;                                 bad "an empty file" "no word vectors" empty.txt o12

echo "glove_convert: GloVe text, .vec with header, .gz, stdin and zip --member convert to the same folder; daei embed" \
  "gives the normalised mean; 12 malformed inputs refused in one line"
