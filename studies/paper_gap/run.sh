#!/usr/bin/env bash
# The paper-gap study (issue 36; results/paper_gap.md): {GloVe, the contextual embedder} x {threat model with equal
# budgets, DAEI's protocol as written}, one size for all four (configs/paper-gap/*.yaml).
#   studies/paper_gap/run.sh [glove|contextual|all]      (default all; NP ranks, default 2; DAEI the binary)
# The paper-protocol run of an embedder shares the threat-model run's saved work that its switches do not touch
# (corpus, caches, tokenizer, stage 1, stage 2, the control, the clean reference, the dae-corrected chain's
# hypotheses): copied, never recomputed, so both protocols start from the same models. Stage 3 is not shared: the
# paper's protocol keeps its checkpoint of best held-out BLEU (stage3.select_by), the threat model's the last one. The contextual embedder is
# trained first by studies/contextual_embedder/run.sh (runs/contextual-embedder/embedder/final/st). Then
# `python3 studies/paper_gap/summary.py` writes results/paper_gap.{md,json}.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
NP=${NP:-2}
export DAEI=${DAEI:-$PWD/build/daei}
which=${1:-all}
pipeline() {
  local t0=$SECONDS
  launch/mpirun.sh "$NP" pipeline --config "$1"
  echo "[paper-gap] $1: $((SECONDS - t0)) s wall" | tee -a "runs/paper_gap_walls.log"
}
# share FROM TO ENTRY...: copies saved work of run FROM into run TO (those not there yet).
share() {
  local from=runs/$1 to=runs/$2 e; shift 2
  mkdir -p "$to/cache"
  for e in "$@"; do
    [[ -e $from/$e && ! -e $to/$e ]] && cp -a "$from/$e" "$to/$e"
  done
  return 0
}
texts_only=(corpus tokenizer)
same_models=(corpus tokenizer cache/train cache/val cache/test stage1 stage2 stage2-continued clean-inverter
             cache/hyp-train-dae cache/hyp-val-dae)
if [[ $which == all || $which == glove ]]; then
  # The quickstart's caches are this study's GloVe caches (same corpus, embedder, σ and seed) when they exist.
  [[ -d runs/quickstart/cache/train ]] && share quickstart gap-glove-threat "${texts_only[@]}" cache/train cache/val cache/test
  pipeline configs/paper-gap/glove-threat.yaml
  share gap-glove-threat gap-glove-paper "${same_models[@]}"
  pipeline configs/paper-gap/glove-paper.yaml
fi
if [[ $which == all || $which == contextual ]]; then
  [[ -f runs/contextual-embedder/embedder/final/st/modules.json ]] ||
    { echo "paper_gap: no contextual embedder; run studies/contextual_embedder/run.sh first" >&2; exit 2; }
  [[ -d runs/gap-glove-threat/corpus ]] && share gap-glove-threat gap-contextual-threat "${texts_only[@]}"
  pipeline configs/paper-gap/contextual-threat.yaml
  share gap-contextual-threat gap-contextual-paper "${same_models[@]}"
  pipeline configs/paper-gap/contextual-paper.yaml
fi
