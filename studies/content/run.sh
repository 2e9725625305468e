#!/usr/bin/env bash
# Content words (issue 65): the bag-of-words inverters and the linear probe on a finished quickstart run.
#   bash studies/content/run.sh [RUN_DIR]     (default runs/quickstart; its caches, tokenizer and stage-1 DAE are reused)
# Trains, in run directories beside it that link its corpus, caches, tokenizer and stage1/ (so every row sees the same
# noisy training answers and is scored on the same test texts, beside the same floors):
#   NAME-bow    bow-noisy, bow-dae, bow-clean (configs/quickstart.yaml's budget of bow.*: configs/defaults/bow.yaml)
#   NAME-probe  bow-clean and bow-noisy with bow.depth 0: a linear map from the embedding to the words (the probe)
# then `daei eval` in each (no sweep, no per-round tables, no zsinvert: the other rows are the quickstart's own), and
# writes results/content.{md,json} with studies/content/summary.py. Wall time of each step in NAME-bow/timing.json.
#   bash studies/content/run.sh RUN_DIR --long STEPS
# once the above has run: bow-noisy, bow-clean and bow-dae again at bow.steps STEPS (held-out content F1 every 500 steps) in
# NAME-bow-STEPS, points of the frontier only (the rows stay at the one budget); the summary is written again with them.
#   bash studies/content/run.sh RUN_DIR --summary     (results/content.{md,json} again from the runs there are)
#   bash studies/content/run.sh RUN_DIR --guided
# once the first form has run: the T5 inverters guided by the bag of words (guided-noisy, guided-dae, guided-clean;
# stages/recipes/guided.h) in NAME-bow, three at once (each: 2 fold models at bow.*'s budget, then stage 2's budget),
# then eval in NAME-bow again and the summary.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN=${1:-runs/quickstart}
LONG='' GUIDED='' SUMMARY_ONLY=''
if [[ ${2:-} == --summary ]]; then
  SUMMARY_ONLY=1
elif [[ ${2:-} == --guided ]]; then
  GUIDED=1
elif [[ ${2:-} == --long ]]; then
  LONG=${3:?--long needs a number of steps}
  [[ ${LONG} =~ ^[1-9][0-9]*$ ]] || { echo "content: --long ${LONG}: not a number of steps" >&2; exit 2; }
fi
CONFIG=${CONFIG:-configs/quickstart.yaml}
# One rank a command, two commands at a time: the bag-of-words model is small enough that a second rank's all-reduce
# of its 10 k-word output layer costs more than it saves (1 rank: 2.4 steps/s; 2 ranks: 1.2).
NP=${NP:-1}
[[ -f $RUN/eval/results.json && -f $RUN/stage1/final/dae/dae.json ]] ||
  { echo "content: $RUN has no finished eval or stage 1 (run launch/quickstart.sh first)" >&2; exit 2; }
root=$(dirname "$RUN")
name=$(basename "$RUN")
ROOT_FLAGS=()
[[ $(id -u) -eq 0 ]] && ROOT_FLAGS=(--allow-run-as-root)
daei() { mpirun "${ROOT_FLAGS[@]}" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -np "$NP" build/daei "$@"; }
timing_file=$root/$name-bow/timing.jsonl
step() {  # RUN_NAME LABEL ARGS...: one daei command on NP ranks, its wall time appended to timing.jsonl
  local run=$1 label=$2 t0
  shift 2
  # A finished training stage is skipped (its time stays the one recorded when it ran).
  [[ $label != eval && -d $root/$run/$label/final ]] && { echo "content: $run/$label is done, skipped"; return 0; }
  t0=$(date +%s%N)
  daei "$@" --config "$CONFIG" --set run.root="$root" --set run.name="$run" --set bow.enabled=true \
    --set reference.enabled=true >"$root/$run/$label.log" 2>&1 || { tail -20 "$root/$run/$label.log"; return 1; }
  echo "{\"step\": \"$run/$label\", \"seconds\": $(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')}" >>"$timing_file"
}
suffixes=(bow probe)
[[ -n ${LONG} ]] && suffixes=("bow-${LONG}")
for suffix in "${suffixes[@]}"; do
  d=$root/$name-$suffix
  mkdir -p "$d"
  for part in corpus cache tokenizer stage1; do
    [[ -e $d/$part ]] || ln -s "$(realpath "$RUN/$part")" "$d/$part"
  done
done
pair() {  # steps at once (two: a core each); fails when any fails
  local pids=() p ok=0
  for c in "$@"; do eval "$c" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || ok=1; done
  return "$ok"
}
no_extras=(--set eval.sweep=false --set eval.per_round=false --set zsinvert.enabled=false)
summary() {  # the page names every form of this script whose runs it reads
  local long=() cmd="bash studies/content/run.sh $RUN"
  for d in "$root/$name"-bow-[0-9]*; do
    [[ -d $d ]] && long+=(--long "$d") && cmd+="; bash studies/content/run.sh $RUN --long ${d##*-}"
  done
  for d in "$root/$name"-guided-[0-9]* "$root/$name"-guided-copy-[0-9]* "$root/$name"-guided-copy-seed*-[0-9]* \
           "$root/$name"-clean-[0-9]*; do
    [[ -f $d/eval/results.json ]] && long+=(--long "$d")  # studies/content/guided_long.sh
  done
  [[ -d $root/$name-bow/guided-noisy/final ]] && cmd+="; bash studies/content/run.sh $RUN --guided"
  for d in "$root/$name"-guided-[0-9]*; do
    [[ -f $d/eval/results.json ]] && cmd+="; bash studies/content/guided_long.sh $RUN ${d##*-}"
  done
  for d in "$root/$name"-guided-copy-[0-9]* "$root/$name"-guided-copy-seed*-[0-9]*; do
    local seed=${d%-*}
    seed=${seed##*-seed}
    [[ $seed =~ ^[0-9]+$ ]] && seed="SEED=$seed " || seed=""
    [[ -f $d/eval/results.json ]] &&
      cmd+="; ${seed}INPUTS=\"$(cd "$d" && for s in guided-clean guided-noisy guided-dae; do [[ -d $s/final ]] && printf '%s ' "${s#guided-}"; done | sed 's/ $//')\" PRECISION=$(awk '$1 == "precision:" {print $2; exit}' "$d/config.yaml") bash studies/content/guided_long.sh $RUN ${d##*-} --copy"
  done
  /usr/bin/python3 studies/content/summary.py "$RUN" "$root/$name-bow" "$root/$name-probe" "${long[@]}" \
    --out results/content --command "$cmd"
}
if [[ -n ${SUMMARY_ONLY} ]]; then
  summary
  exit 0
fi
if [[ -n ${GUIDED} ]]; then
  [[ -d $root/$name-bow/bow-noisy/final && -d $root/$name-bow/bow-dae/final && -d $root/$name-bow/bow-clean/final ]] ||
    { echo "content: --guided needs $root/$name-bow's bow stages (run the first form first)" >&2; exit 2; }
  # shellcheck disable=SC2016
  pair 'step "$name-bow" guided-noisy train --stage guided-noisy --set guided.enabled=true' \
    'step "$name-bow" guided-dae train --stage guided-dae --set guided.enabled=true' \
    'step "$name-bow" guided-clean train --stage guided-clean --set guided.enabled=true'
  step "$name-bow" eval eval "${no_extras[@]}"
  summary
  exit 0
fi
if [[ -n ${LONG} ]]; then
  timing_file=$root/$name-bow-${LONG}/timing.jsonl  # appended to: a second run adds the stages it trains
  long=(--set bow.steps="${LONG}" --set bow.eval_every=500)
  # shellcheck disable=SC2016
  pair 'step "$name-bow-$LONG" bow-noisy train --stage bow-noisy "${long[@]}"' \
    'step "$name-bow-$LONG" bow-clean train --stage bow-clean "${long[@]}"'
  step "$name-bow-$LONG" bow-dae train --stage bow-dae "${long[@]}"
  step "$name-bow-$LONG" eval eval "${no_extras[@]}" "${long[@]}"
  summary
  exit 0
fi
probe=(--set bow.depth=0)
# The steps are quoted for pair()'s eval, which expands them.
# shellcheck disable=SC2016
pair 'step "$name-bow" bow-noisy train --stage bow-noisy' 'step "$name-bow" bow-dae train --stage bow-dae'
# shellcheck disable=SC2016
pair 'step "$name-bow" bow-clean train --stage bow-clean' \
  'step "$name-probe" bow-clean train --stage bow-clean "${probe[@]}"'
# shellcheck disable=SC2016
pair 'step "$name-probe" bow-noisy train --stage bow-noisy "${probe[@]}"' \
  'step "$name-bow" eval eval "${no_extras[@]}"'
step "$name-probe" eval eval "${no_extras[@]}" "${probe[@]}"
summary
