#!/usr/bin/env bash
# Issue 16's memory check: peak RSS per rank of stage 1 and stage 2 at 192 k rows (the quickstart's cache) and at
# 7 M rows (studies/scale/run.sh's cache with 200 k-row shards), same models, batches and steps, 2 ranks, fresh
# stage folders each time. About 5 minutes on 2 cores. Writes runs/scale-memory/memory.json.
#   bash studies/scale/memory.sh                 (after launch/quickstart.sh and studies/scale/run.sh)
#   BUFFER_MB=16 bash studies/scale/memory.sh    (a read buffer that both corpora fill: only the corpus size differs)
#   DAEI=/path/to/daei TAG=before bash studies/scale/memory.sh   (another binary; runs/scale-memory-16mb-before)
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
D=${DAEI:-build/daei}
CFG=configs/scale-7m.yaml
MPI=(mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
[[ $(id -u) -eq 0 ]] && MPI+=(--allow-run-as-root)
Q=${SMALL:-runs/quickstart}  # the 192 k side (SMALL=runs/scale-192k-synth: the 7 M corpus's texts, 192 k of them)
BIG=${BIG:-runs/scale-7m-s200k}
S1=${S1_STEPS:-300}
S2=${S2_STEPS:-60}
OUT=runs/scale-memory-${BUFFER_MB:-64}mb${TAG:+-$TAG}
for need in "$Q/cache/train/manifest.json" "$Q/tokenizer/spm.model" "$BIG/cache/train/manifest.json"; do
  [[ -f $need ]] ||
    { echo "scale_memory: $need is missing (run launch/quickstart.sh and studies/scale/run.sh)"; exit 1; }
done
rm -rf "$OUT"
mkdir -p "$OUT"
common=(--config "$CFG" --set inverter.tokenizer="$PWD/$Q/tokenizer/spm.model" --set stage1.steps="$S1"
        --set stage2.steps="$S2" --set train.ckpt_every=100000 --set cache.read_buffer_mb="${BUFFER_MB:-64}")
declare -A RSS
for side in 192k 7m; do
  src=$Q; [[ $side == 7m ]] && src=$BIG
  name=scale-memory-$side${TAG:+-$TAG}
  rm -rf "runs/$name"
  mkdir -p "runs/$name"
  ln -s "$PWD/$src/corpus" "runs/$name/corpus"
  ln -s "$PWD/$src/cache" "runs/$name/cache"
  rows=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"])' "$src/cache/train/manifest.json")
  for stage in 1 2; do
    "${MPI[@]}" -np 2 "$D" train --stage $stage "${common[@]}" --set run.name="$name" >"$OUT/stage${stage}_$side.log" 2>&1 ||
      { tail -20 "$OUT/stage${stage}_$side.log"; exit 1; }
    RSS[stage${stage}_$side]=$(grep -o "peak RSS per rank (MB): .*" "$OUT/stage${stage}_$side.log" | sed 's/.*: //')
    echo "[memory] stage $stage, $rows rows: peak RSS per rank ${RSS[stage${stage}_$side]} MB"
  done
  rm -rf "runs/$name"
done
python3 - "$OUT/memory.json" "${RSS[stage1_192k]}" "${RSS[stage1_7m]}" "${RSS[stage2_192k]}" "${RSS[stage2_7m]}" <<'PY'
import json, re, sys
nums = lambda s: [float(x) for x in re.findall(r"[0-9.]+", s)]
s1a, s1b, s2a, s2b = (nums(s) for s in sys.argv[2:6])
out = {"stage1_192k_mb": s1a, "stage1_7m_mb": s1b, "stage2_192k_mb": s2a, "stage2_7m_mb": s2b,
       "stage1_growth": max(s1b) / max(s1a) - 1, "stage2_growth": max(s2b) / max(s2a) - 1}
json.dump(out, open(sys.argv[1], "w"), indent=2)
print(json.dumps(out, indent=2))
PY
