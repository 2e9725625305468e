#!/usr/bin/env bash
# The paper-gap study's GloVe threat-model run (configs/paper-gap/glove-threat.yaml) once a training seed (issue 46
# item 4: the seeded base of the one-switch runs, studies/budget_switch/run.sh gapg cut SEED...), then its tables:
#   studies/glove_replicate/run.sh [SEED ...]          (default: 1 2 3)
# A seed is train.seed: the DAE, every inverter, stage 3, the hypotheses and the correctors are trained again; the
# corpus, tokenizer and caches (the release's answers, run.seed) are the first seed's run's, linked by the others,
# and taken from QS (a quickstart run of the same corpus, embedder, σ and run.seed; default runs/quickstart) when it
# has them. The clean-inverter reference (outside the threat model) is trained with the first seed only.
# Each seed's run: runs/gapg-sSEED (+ .log, .cpu_s); then studies/contextual_replicate/summary.py writes
# results/glove_replicate.{json,table.md} and results/glove_replicate/samples.md.
# Env: CONFIG (configs/paper-gap/glove-threat.yaml), NP (2), DAEI (build/daei), QS, PRECISION (auto).
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${CONFIG:-configs/paper-gap/glove-threat.yaml}
NP=${NP:-2}
export DAEI=${DAEI:-build/daei}
QS=${QS:-runs/quickstart}
SEEDS=("$@")
((${#SEEDS[@]})) || SEEDS=(1 2 3)
for s in "${SEEDS[@]}"; do [[ $s =~ ^[0-9]+$ ]] || { echo "glove_replicate: seed '$s' is not a number" >&2; exit 2; }; done
[[ -x $DAEI ]] || bash launch/build.sh --target daei
shared=(corpus tokenizer cache/train cache/val cache/test)
first=${SEEDS[0]}
runs=()
for s in "${SEEDS[@]}"; do
  run=runs/gapg-s$s
  runs+=("$run")
  mkdir -p "$run/cache"
  src=$QS
  [[ $s == "$first" ]] || src=runs/gapg-s$first
  for e in "${shared[@]}"; do
    [[ -e $run/$e || ! -e $src/$e ]] && continue
    ln -s "$(realpath "$src/$e")" "$run/$e"
  done
  sets=(--set "run.name=gapg-s$s" --set "train.seed=$s" --set "train.precision=${PRECISION:-auto}")
  [[ $s == "$first" ]] || sets+=(--set reference.enabled=false)
  echo "[glove-replicate] seed $s: $run ($(date +%H:%M:%S))"
  python3 studies/common/cpu_seconds.py "$run.cpu_s" \
    bash launch/mpirun.sh "$NP" pipeline --config "$CONFIG" "${sets[@]}" >"$run.log" 2>&1 ||
    { echo "[glove-replicate] seed $s failed, see $run.log" >&2; exit 1; }
done
python3 studies/contextual_replicate/summary.py --out results/glove_replicate --config "$CONFIG" \
  --command "studies/glove_replicate/run.sh ${SEEDS[*]}" \
  --title "The GloVe replicate: the paper-gap study's threat-model run (GloVe-100d, σ 0.04)" "${runs[@]}"
