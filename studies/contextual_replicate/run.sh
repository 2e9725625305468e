#!/usr/bin/env bash
# The contextual replicate (issue 46): the whole attack (`daei pipeline`, configs/contextual-replicate.yaml) on the
# contextual embedder, once a training seed, then the tables of every seed:
#   studies/contextual_replicate/run.sh [SEED ...]          (default: 1 2 3)
# A seed is train.seed: the DAE, every inverter, stage 3, the hypotheses and the correctors are trained again; the
# corpus, tokenizer, pretrain T5 and the caches (the release's answers) are shared by every seed
# (studies/contextual_embedder/data.sh, runs/ctxf-data; each run links them and writes its hypotheses in a cache folder
# of its own). The clean-inverter reference (outside the threat model) is trained with the first seed only.
# Each seed's run: runs/ctxr-sSEED, its log runs/ctxr-sSEED.log, its CPU seconds (every rank's user + system)
# runs/ctxr-sSEED.cpu_s. Then studies/contextual_replicate/summary.py writes
# results/contextual_replicate.{json,table.md} and results/contextual_replicate/samples.md (OUT overrides the prefix).
# Env: CONFIG (configs/contextual-replicate.yaml), NP (2), DAEI (build/daei), OUT (results/contextual_replicate).
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${CONFIG:-configs/contextual-replicate.yaml}
NP=${NP:-2}
D=${DAEI:-build/daei}
OUT=${OUT:-results/contextual_replicate}
SEEDS=("$@")
((${#SEEDS[@]})) || SEEDS=(1 2 3)
for s in "${SEEDS[@]}"; do [[ $s =~ ^[0-9]+$ ]] || { echo "contextual_replicate: seed '$s' is not a number" >&2; exit 2; }; done
CONFIG=$CONFIG NP=$NP DAEI=$D bash studies/contextual_embedder/data.sh
first=${SEEDS[0]}
runs=()
for s in "${SEEDS[@]}"; do
  run=runs/ctxr-s$s
  runs+=("$run")
  mkdir -p "$run/cache"
  for d in corpus tokenizer pretrain; do [[ -e $run/$d ]] || ln -s "../ctxf-data/$d" "$run/$d"; done
  for c in runs/ctxf-data/cache/*/; do
    c=$(basename "$c")
    [[ -e $run/cache/$c ]] || ln -s "../../ctxf-data/cache/$c" "$run/cache/$c"
  done
  sets=(--set "run.name=ctxr-s$s" --set "train.seed=$s")
  [[ $s == "$first" ]] || sets+=(--set reference.enabled=false)
  echo "[replicate] seed $s: $run ($(date +%H:%M:%S))"
  DAEI=$D python3 studies/common/cpu_seconds.py "$run.cpu_s" \
    bash launch/mpirun.sh "$NP" pipeline --config "$CONFIG" "${sets[@]}" >"$run.log" 2>&1 ||
    { echo "[replicate] seed $s failed, see $run.log" >&2; exit 1; }
done
python3 studies/contextual_replicate/summary.py --out "$OUT" "${runs[@]}"
