#!/usr/bin/env bash
# One switch of the paper's protocol on seeded runs (issue 46 item 4): the noisy baseline's budget. For each seed,
# a copy of the base run runs/PREFIX-sSEED (made by studies/contextual_replicate/run.sh or
# studies/glove_replicate/run.sh) keeps every stage the switch does not touch and trains the noisy chain again with the switch's sets, then
# evaluates every row, so that daei and the switched noisy-vec2text are compared on one table.
#   studies/budget_switch/run.sh PREFIX TAG SEED...      e.g. studies/budget_switch/run.sh ctxr cut 1 2 3
# TAG cut:     stage2.noisy_steps = 30/100 of stage2.steps at half stage2.lr (DAEI's 30 epochs at 5e-4 against
#              100 at 1e-3; configs/paper-gap/glove-paper.yaml), nothing else changed.
# TAG restore: stage2.noisy_steps 0 and noisy_lr 0 (the threat model's equal budget) on a paper-protocol base.
# The copy shares the base's data by its links and copies its trained stages (never written again: each is complete,
# and the config guard refuses the copy if a set would touch one). Writes runs/PREFIX-TAG-sSEED (+ .log, .cpu_s).
# Env: CONFIG (the base's config; default configs/contextual-replicate.yaml), NP (2), DAEI (build/daei), PRECISION
# (train.precision, auto: the base runs' own).
usage() { awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; }
[[ ${1:-} == -h || ${1:-} == --help ]] && { usage; exit 0; }
(($# >= 3)) || { usage >&2; exit 2; }
set -euo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${CONFIG:-configs/contextual-replicate.yaml}
NP=${NP:-2}
export DAEI=${DAEI:-build/daei}
prefix=$1 tag=$2
shift 2
for s in "$@"; do [[ $s =~ ^[0-9]+$ ]] || { echo "budget_switch: seed '$s' is not a number" >&2; exit 2; }; done
# (awk reads the whole dump: an early exit would end daei with SIGPIPE under pipefail)
stage2_key() { "$DAEI" --config "$CONFIG" --dump-config | awk -v k="  $1:" '/^stage2:/ {s = 1} s && !d && index($0, k) == 1 {print $2; d = 1}'; }
steps=$(stage2_key steps)
lr=$(stage2_key lr)
[[ $steps =~ ^[0-9]+$ && -n $lr ]] || { echo "budget_switch: cannot read stage2.steps and stage2.lr of $CONFIG" >&2; exit 2; }
case $tag in
  cut) switch=(--set "stage2.noisy_steps=$((steps * 30 / 100))" --set "stage2.noisy_lr=$(python3 -c "print($lr / 2)")") ;;
  restore) switch=(--set stage2.noisy_steps=0 --set stage2.noisy_lr=0) ;;
  *) echo "budget_switch: unknown switch '$tag' (cut | restore)" >&2; exit 2 ;;
esac
noisy_chain=(noisy-inverter noisy-corrector cache/hyp-train-noisy cache/hyp-val-noisy eval clean-inverter
             clean-corrector)
for s in "$@"; do
  from=runs/$prefix-s$s to=runs/$prefix-$tag-s$s
  [[ -f $from/eval/results.json ]] || { echo "budget_switch: $from has no eval/results.json" >&2; exit 2; }
  if [[ ! -d $to ]]; then
    rm -rf "$to.partial"  # a copy that an earlier call left unfinished
    mkdir -p "$to.partial/cache"
    for e in "$from"/* "$from"/cache/*; do
      rel=${e#"$from"/}
      [[ $rel == cache || $rel == daei.log ]] && continue
      skip=0
      for n in "${noisy_chain[@]}"; do [[ $rel == "$n" ]] && skip=1; done
      ((skip)) || cp -a "$e" "$to.partial/$rel"
    done
    mv "$to.partial" "$to"
  fi
  echo "[switch] $tag seed $s: $to ${switch[*]} ($(date +%H:%M:%S))"
  python3 studies/common/cpu_seconds.py "$to.cpu_s" \
    bash launch/mpirun.sh "$NP" pipeline --config "$CONFIG" --set "run.name=$prefix-$tag-s$s" --set "train.seed=$s" \
    --set reference.enabled=false --set "train.precision=${PRECISION:-auto}" "${switch[@]}" >"$to.log" 2>&1 ||
    { echo "[switch] $tag seed $s failed, see $to.log" >&2; exit 1; }
done
