#!/usr/bin/env bash
# The headline pairs over training seeds (issue 65 item 5): daei − noisy-vec2text (and the other DAE − no-DAE pairs)
# with the attack trained again under other training seeds on the same release answers.
#   bash studies/content/seeds.sh [RUN_DIR] [SEED ...]     (default runs/quickstart, seeds 2 3)
# RUN_DIR is a finished quickstart run (its train.seed is the first seed). Each SEED trains, in RUN-seedN beside it
# (linking RUN's corpus, tokenizer and the caches of its splits: the same texts, the same noisy answers, the same test
# texts and floors; the hypotheses are the seed's own), every trained stage of the pipeline again with train.seed N
# and the precision RUN ran in (its daei.log `[precision]` line: the seeds must not differ in precision too); the
# clean reference, zsinvert, the fortunes split and the σ sweep are left out (no row of the pairs reads them). Then results/content_seeds.{md,json}
# (studies/content/seeds.py) over RUN and every RUN-seedN that has finished. Re-running resumes (the pipeline skips
# what is complete). Logs: RUN-seedN.log, wall and CPU time: RUN-seedN.{wall_s,cpu_s}.
#   bash studies/content/seeds.sh RUN_DIR --summary        (the page again from the runs there are)
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN=${1:-runs/quickstart}
shift || true
[[ -f $RUN/eval/results.json ]] || { echo "seeds: $RUN has no finished eval (run launch/quickstart.sh first)" >&2; exit 2; }
SUMMARY_ONLY=''
SEEDS=()
for a in "$@"; do
  case $a in
    --summary) SUMMARY_ONLY=1 ;;
    *) [[ $a =~ ^[0-9]+$ ]] || { echo "seeds: $a: not a seed (a number)" >&2; exit 2; }; SEEDS+=("$a") ;;
  esac
done
((${#SEEDS[@]})) || SEEDS=(2 3)
CONFIG=${CONFIG:-configs/quickstart.yaml}
NP=${NP:-2}
root=$(dirname "$RUN")
name=$(basename "$RUN")
# The precision RUN resolved (auto measures on each machine; a seed run on the same machine could resolve the other
# way where the two are close).
precision=fp32
last=$(awk '/\[precision\]/ {l = $0} END {print l}' "$RUN/daei.log" 2>/dev/null || true)
[[ $last == *"[precision] bf16"* ]] && precision=bf16
ROOT_FLAGS=()
[[ $(id -u) -eq 0 ]] && ROOT_FLAGS=(--allow-run-as-root)
if [[ -z $SUMMARY_ONLY ]]; then
  for seed in "${SEEDS[@]}"; do
    dir=$root/$name-seed$seed
    mkdir -p "$dir/cache"
    for f in corpus tokenizer; do
      [[ -e $dir/$f ]] || ln -s "$(realpath "$RUN/$f")" "$dir/$f"
    done
    # The release's answers split by split, not cache/ whole: the hypotheses the correctors train on (cache/hyp-*)
    # are the seed's own inverters' and must be made again in the seed's run.
    for c in "$RUN"/cache/*; do
      c=$(basename "$c")
      [[ $c == hyp-* || -e $dir/cache/$c ]] || ln -s "$(realpath "$RUN/cache/$c")" "$dir/cache/$c"
    done
    echo "seeds: $dir (train.seed $seed, train.precision $precision), log $dir.log"
    t0=$(date +%s)
    # CPU seconds of the whole command tree, as /usr/bin/time sees them (user + system).
    /usr/bin/time -f "%U %S" -o "$dir.time" \
      mpirun "${ROOT_FLAGS[@]}" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 -np "$NP" \
      build/daei pipeline --config "$CONFIG" --set run.root="$root" --set run.name="$name-seed$seed" \
      --set train.seed="$seed" --set train.precision="$precision" --set reference.enabled=false \
      --set zsinvert.enabled=false --set eval.sweep=false --set eval.per_round=false --set 'eval.splits=[test]' \
      >"$dir.log" 2>&1
    echo $(($(date +%s) - t0)) >"$dir.wall_s"
    awk '{print $1 + $2}' "$dir.time" >"$dir.cpu_s"
  done
fi
runs=("$RUN")
for d in "$root/$name"-seed*; do
  [[ -f $d/eval/results.json ]] && runs+=("$d")
done
python3 studies/content/seeds.py "${runs[@]}" --out results/content_seeds \
  --command "bash studies/content/seeds.sh $RUN ${SEEDS[*]}"
