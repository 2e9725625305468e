#!/usr/bin/env bash
# DAEI's protocol on seeded threat-model runs (issue 46 item 4): for each seed, runs/PREFIX-paper-sSEED starts from a
# copy of the threat-model run runs/PREFIX-sSEED's work that the paper's switches do not touch (its data links, stage 1,
# stage 2, the control, the dae chains' hypotheses: the switches change correctors, stage 3's selection, the noisy
# baseline and daei's hypotheses) and runs the pipeline with the paper's config and the same train.seed.
#   studies/budget_switch/paper_seeds.sh PREFIX CONFIG SEED...
#   e.g. studies/budget_switch/paper_seeds.sh ctxr configs/contextual-replicate-paper.yaml 1 2 3
# Then studies/budget_switch/run.sh PREFIX-paper restore SEED... (CONFIG=the same) takes the baseline's budget back
# alone.
# Env: NP (2), DAEI (build/daei), PRECISION (train.precision, auto).
usage() { awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; }
[[ ${1:-} == -h || ${1:-} == --help ]] && { usage; exit 0; }
(($# >= 3)) || { usage >&2; exit 2; }
set -euo pipefail
cd "$(dirname "$0")/../.."
NP=${NP:-2}
export DAEI=${DAEI:-build/daei}
prefix=$1 config=$2
shift 2
[[ -f $config ]] || { echo "paper_seeds: no config $config" >&2; exit 2; }
for s in "$@"; do [[ $s =~ ^[0-9]+$ ]] || { echo "paper_seeds: seed '$s' is not a number" >&2; exit 2; }; done
shared=(corpus tokenizer pretrain cache/train cache/val cache/test cache/ood-fortunes stage1 stage2 stage2-continued
        cache/hyp-train-dae cache/hyp-val-dae cache/hyp-train-dae-continued cache/hyp-val-dae-continued)
for s in "$@"; do
  from=runs/$prefix-s$s to=runs/$prefix-paper-s$s
  [[ -f $from/eval/results.json ]] || { echo "paper_seeds: $from has no eval/results.json" >&2; exit 2; }
  if [[ ! -d $to ]]; then
    rm -rf "$to.partial"  # a copy that an earlier call left unfinished
    mkdir -p "$to.partial/cache"
    for e in "${shared[@]}"; do [[ -e $from/$e ]] && cp -a "$from/$e" "$to.partial/$e"; done
    mv "$to.partial" "$to"
  fi
  echo "[paper] seed $s: $to ($(date +%H:%M:%S))"
  python3 studies/common/cpu_seconds.py "$to.cpu_s" \
    bash launch/mpirun.sh "$NP" pipeline --config "$config" --set "run.name=$prefix-paper-s$s" --set "train.seed=$s" \
    --set reference.enabled=false --set "train.precision=${PRECISION:-auto}" >"$to.log" 2>&1 ||
    { echo "[paper] seed $s failed, see $to.log" >&2; exit 1; }
done
