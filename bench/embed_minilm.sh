#!/usr/bin/env bash
# embed_minilm: daei's MiniLM embedding (build/bench_embed_bench) against sentence-transformers' own encode on the same
# texts and the same torch version (2.11, the wheel in the asset cache), batch 64, 1 thread each, fp32, alternated.
#   bash bench/embed_minilm.sh [--build DIR] [--rounds N]
# Texts: the 500 corpus texts of tests/fixtures/minilm/texts.jsonl (WordNet glosses and fortunes). The
# sentence-transformers side runs in the throw-away venv of tests/fixtures/minilm/make_fixtures.sh (made there).
# Prints one line a round and the median ratio daei / sentence-transformers in texts/s (target >= 1.3).
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build ROUNDS=3
while (($#)); do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--rounds N]" >&2; exit 2 ;;
  esac
done
ASSETS="${DAEI_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/daei}"
MODEL="$ASSETS/all-MiniLM-L6-v2"
VENV=$(find "$ASSETS" -maxdepth 1 -name "venv-st-*" -type d 2>/dev/null | sort | sed -n 1p)
[[ -x "$VENV/bin/python" ]] || { echo "embed_minilm: no sentence-transformers venv in $ASSETS (bash tests/fixtures/minilm/make_fixtures.sh)" >&2; exit 1; }
[[ -x "$BUILD/bench_embed_bench" ]] || { echo "embed_minilm: $BUILD/bench_embed_bench missing (launch/build.sh)" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
/usr/bin/python3 - tests/fixtures/minilm/texts.jsonl "$T/texts.txt" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")][1:]
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for r in rows[:500]:
        f.write(r["text"].replace("\n", " ") + "\n")
PY
cat >"$T/st.py" <<'PY'
import json, sys, time
import torch
from sentence_transformers import SentenceTransformer
torch.set_num_threads(1)
texts = open(sys.argv[2], encoding="utf-8").read().split("\n")[:-1]
m = SentenceTransformer(sys.argv[1], device="cpu")
m.encode(texts[:64], batch_size=64)  # warm-up
t0 = time.perf_counter()
e = m.encode(texts, batch_size=64, convert_to_numpy=True)
print(json.dumps({"texts": len(texts), "s": time.perf_counter() - t0, "torch": torch.__version__}))
PY
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
ratios=()
for ((r = 1; r <= ROUNDS; ++r)); do
  d=$("$BUILD/bench_embed_bench" --model "$MODEL" --texts "$T/texts.txt" --batch 64 --max-length 256 --rounds 2 2>/dev/null | tail -1)
  s=$(HF_HUB_OFFLINE=1 "$VENV/bin/python" "$T/st.py" "$MODEL" "$T/texts.txt" 2>/dev/null | tail -1)
  line=$(/usr/bin/python3 -c '
import json, sys
d, s = json.loads(sys.argv[1]), json.loads(sys.argv[2])
dr = d["texts"] / min(d["times"]); sr = s["texts"] / s["s"]
print("%.1f %.1f %.3f %s" % (dr, sr, dr / sr, s["torch"]))' "$d" "$s")
  read -r dr sr ratio tv <<<"$line"
  echo "round $r: daei $dr texts/s, sentence-transformers $sr texts/s (torch $tv): ratio $ratio"
  ratios+=("$ratio")
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf "embed_minilm: median ratio %.3f (target >= 1.3: %s)\n", m, (m >= 1.3 ? "met" : "not met")}'
