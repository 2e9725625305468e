#!/usr/bin/env bash
# A point of the guided inverter's frontier (issue 65): guided-clean at stage2.steps STEPS instead of stage 2's budget,
# and its control, the unguided clean inverter at the same steps.
#   bash studies/content/guided_long.sh RUN_DIR STEPS      (after studies/content/run.sh RUN_DIR --guided)
# Trains in NAME-guided-STEPS beside RUN_DIR, which links RUN_DIR's corpus, caches, tokenizer and stage1/ and
# NAME-bow's bow-clean, and reuses NAME-bow/guided-clean's training guides (the fold models' words: the same guides,
# only the inverter's steps differ); the control in NAME-clean-STEPS; `daei eval` in both and the summary
# (results/content.md). NP ranks a command (default 1).
#   bash studies/content/guided_long.sh RUN_DIR STEPS --copy
# guided-clean with the copy gate (guided.copy) in NAME-guided-copy-STEPS; its control is guided-clean without it at
# the same steps (NAME-bow's at stage 2's budget, else NAME-guided-STEPS's), so no unguided control is trained.
# PRECISION (fp32 | bf16 | auto, default auto) is train.precision: give the one its control was trained in. INPUTS
# (default "clean") adds guided-noisy and guided-dae with the gate: INPUTS="clean noisy dae". SEED (with --copy)
# sets run.seed (the inverters' initial weights and batch order; the guides stay those of the bow run) and trains in
# NAME-guided-copy-seedSEED-STEPS: the headline pair's other training seeds.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN=${1:?usage: $0 RUN_DIR STEPS}
STEPS=${2:?usage: $0 RUN_DIR STEPS [--copy]}
[[ ${STEPS} =~ ^[1-9][0-9]*$ ]] || { echo "guided_long: ${STEPS}: not a number of steps" >&2; exit 2; }
COPY=false
case ${3:-} in
  "") ;;
  --copy) COPY=true ;;
  *) echo "guided_long: ${3}: unknown option (--copy)" >&2; exit 2 ;;
esac
kind=guided
[[ $COPY == true ]] && kind=guided-copy
SEED=${SEED:-}
[[ -z $SEED || ( $SEED =~ ^[0-9]+$ && $COPY == true ) ]] ||
  { echo "guided_long: SEED=$SEED: a number, and only with --copy" >&2; exit 2; }
root=$(dirname "$RUN")
name=$(basename "$RUN")
run_name=$name-$kind${SEED:+-seed$SEED}-$STEPS
bow=$root/$name-bow
# The inputs whose guided inverter is trained: clean, and with --copy also those in INPUTS (default "clean"; e.g.
# INPUTS="clean noisy dae").
inputs=(clean)
[[ $COPY == true ]] && read -r -a inputs <<<"${INPUTS:-clean}"
d=$root/$run_name
for input in "${inputs[@]}"; do
  [[ $input == clean || $input == noisy || $input == dae ]] || { echo "guided_long: INPUTS: $input is not clean, noisy or dae" >&2; exit 2; }
  [[ -f $bow/guided-$input/guidance/train.txt && -d $bow/bow-$input/final ]] ||
    { echo "guided_long: no $bow/guided-$input/guidance (run studies/content/run.sh $RUN --guided first)" >&2; exit 2; }
  mkdir -p "$d/guided-$input"
  [[ -e $d/bow-$input ]] || ln -s "$(realpath "$bow/bow-$input")" "$d/bow-$input"
  [[ -d $d/guided-$input/guidance ]] || cp -r "$bow/guided-$input/guidance" "$d/guided-$input/"
done
for part in corpus cache tokenizer stage1; do [[ -e $d/$part ]] || ln -s "$(realpath "$RUN/$part")" "$d/$part"; done
ROOT_FLAGS=()
[[ $(id -u) -eq 0 ]] && ROOT_FLAGS=(--allow-run-as-root)
flags=(--config "${CONFIG:-configs/quickstart.yaml}" --set run.root="$root" --set run.name="$run_name"
       --set bow.enabled=true --set reference.enabled=true --set guided.enabled=true --set stage2.steps="$STEPS"
       --set guided.copy="$COPY" --set train.precision="${PRECISION:-auto}")
[[ -n $SEED ]] && flags+=(--set run.seed="$SEED")
daei() { mpirun "${ROOT_FLAGS[@]}" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -np "${NP:-1}" build/daei "$@"; }
for input in "${inputs[@]}"; do
  [[ -d $d/guided-$input/final ]] && continue  # a finished stage keeps the time recorded when it ran
  t0=$(date +%s)
  daei train --stage "guided-$input" "${flags[@]}" >"$d/guided-$input.log" 2>&1 || { tail -20 "$d/guided-$input.log"; exit 1; }
  echo "{\"step\": \"$run_name/guided-$input\", \"seconds\": $(($(date +%s) - t0))}" >>"$d/timing.jsonl"
done
daei eval "${flags[@]}" --set eval.sweep=false --set eval.per_round=false --set zsinvert.enabled=false \
  >"$d/eval.log" 2>&1 || { tail -20 "$d/eval.log"; exit 1; }
if [[ $COPY == true ]]; then
  bash studies/content/run.sh "$RUN" --summary
  exit 0
fi
# The control: the clean inverter, no guide, at the same steps.
c=$root/$name-clean-$STEPS
mkdir -p "$c"
for part in corpus cache tokenizer stage1; do [[ -e $c/$part ]] || ln -s "$(realpath "$RUN/$part")" "$c/$part"; done
control=(--config "${CONFIG:-configs/quickstart.yaml}" --set run.root="$root" --set run.name="$name-clean-$STEPS"
         --set reference.enabled=true --set stage2.steps="$STEPS")
if [[ ! -d $c/clean-inverter/final ]]; then
  t0=$(date +%s)
  daei train --stage clean-inverter "${control[@]}" >"$c/clean-inverter.log" 2>&1 || { tail -20 "$c/clean-inverter.log"; exit 1; }
  echo "{\"step\": \"$name-clean-$STEPS/clean-inverter\", \"seconds\": $(($(date +%s) - t0))}" >>"$c/timing.jsonl"
fi
daei eval "${control[@]}" --set eval.sweep=false --set eval.per_round=false --set zsinvert.enabled=false \
  >"$c/eval.log" 2>&1 || { tail -20 "$c/eval.log"; exit 1; }
# The summary of run.sh (every form that has run).
bash studies/content/run.sh "$RUN" --summary
