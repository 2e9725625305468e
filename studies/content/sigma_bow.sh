#!/usr/bin/env bash
# Where does the cheapest attack reach the words? The bag of words retrained at each σ of a grid (issue 65).
#   bash studies/content/sigma_bow.sh [RUN_DIR] [SIGMA ...]     (default runs/quickstart; 0.02 0.05 0.10 and RUN's σ)
# The quickstart's bag-of-words row (bow-noisy, configs/defaults/bow.yaml's budget, one rank) answers the release at
# one σ. Here the release is queried again at every σ of the grid, with the same texts (RUN's corpus and tokenizer
# linked), into runs/NAME-bow-sigma-S/cache (train: noisy only; val; test with its clean embeddings for eval); RUN's
# own σ links RUN's caches instead, and that run also trains bow-clean (σ = 0, a reference). Then bow-noisy on each
# (two at once, a core each; one budget for every σ) and `daei eval` on the test split beside both floors at that σ.
# results/content_sigma.{md,json} (studies/content/sigma_bow.py) puts them beside the release report's recall@1 and
# its bound on the bits a noisy answer carries (results/release_sigma.json). Finished steps are skipped.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
D=build/daei
RUN=${1:-runs/quickstart}
shift || true
CONFIG=${CONFIG:-configs/quickstart.yaml}
[[ -f $RUN/cache/train/manifest.json && -f $RUN/cache/test/clean/manifest.json ]] ||
  { echo "sigma_bow: $RUN has no finished caches (run launch/quickstart.sh first)" >&2; exit 2; }
run_sigma=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['sigma'])" "$RUN/eval/results.json" 2>/dev/null ||
  awk '$1 == "sigma:" {print $2; exit}' "$RUN/config.yaml")
SIGMAS=("$@")
((${#SIGMAS[@]})) || SIGMAS=(0.02 0.05 0.10 "$run_sigma")
for s in "${SIGMAS[@]}"; do
  [[ $s =~ ^0?\.[0-9]*[1-9][0-9]*$ ]] || { echo "sigma_bow: $s: not a σ in (0, 1)" >&2; exit 2; }
done
root=$(dirname "$RUN")
name=$(basename "$RUN")
# shellcheck source=studies/common/mpi.bash
source studies/common/mpi.bash
same() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 == b + 0) }'; }
EVAL=(--set 'eval.splits=[test]' --set eval.sweep=false --set eval.per_round=false --set zsinvert.enabled=false)
# The wall time of the steps that ran, added up over invocations (a second run that skips everything adds ~0).
wall_file=$root/$name-bow-sigma.wall_s
t_all=$SECONDS
runs=()
# 1. The release's answers at each σ (two ranks; the expensive part: 160 k training texts through MiniLM each).
for s in "${SIGMAS[@]}"; do
  r=$name-bow-sigma-$s
  d=$root/$r
  runs+=("$r")
  mkdir -p "$d"
  parts=(corpus tokenizer)
  same "$s" "$run_sigma" && parts+=(cache)
  for p in "${parts[@]}"; do [[ -e $d/$p ]] || ln -s "$(realpath "$RUN/$p")" "$d/$p"; done
  same "$s" "$run_sigma" && continue
  at=(--config "$CONFIG" --set run.root="$root" --set run.name="$r" --set embedder.sigma="$s")
  for split in train val test; do
    clean=()
    [[ $split == test ]] && clean=(--clean)
    [[ -f $d/cache/$split/manifest.json ]] && continue
    echo "sigma_bow: σ $s: the release's answers for $split"
    daei_mpi 2 cache build --split "$split" "${clean[@]}" "${at[@]}" >>"$d.cache.log" 2>&1 ||
      { tail -5 "$d.cache.log"; exit 1; }
  done
done
# 2. bow-noisy at each σ (bow-clean beside RUN's σ), two at once on a core each.
jobs_=()
for s in "${SIGMAS[@]}"; do
  jobs_+=("$s bow-noisy")
  same "$s" "$run_sigma" && jobs_+=("$s bow-clean")
done
train_one() {  # SIGMA STAGE
  local r=$name-bow-sigma-$1 t0=$SECONDS
  [[ -f $root/$r/$2/final/DONE ]] && return 0
  daei_mpi 1 train --stage "$2" --config "$CONFIG" --set run.root="$root" --set run.name="$r" --set embedder.sigma="$1" \
    --set bow.enabled=true --set reference.enabled=true >"$root/$r.$2.log" 2>&1 || { tail -5 "$root/$r.$2.log"; return 1; }
  echo $((SECONDS - t0)) >"$root/$r.$2.train_s"
}
for ((i = 0; i < ${#jobs_[@]}; i += 2)); do
  pids=()
  for j in "${jobs_[@]:i:2}"; do
    # shellcheck disable=SC2086  # "SIGMA STAGE" splits into its two words
    train_one $j &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
done
# 3. eval at each σ (the trained bow rows and both floors, test split).
for s in "${SIGMAS[@]}"; do
  r=$name-bow-sigma-$s
  [[ -f $root/$r/eval/results.json ]] && continue
  "$D" eval --config "$CONFIG" --set run.root="$root" --set run.name="$r" --set embedder.sigma="$s" \
    --set bow.enabled=true --set reference.enabled=true "${EVAL[@]}" >"$root/$r.eval.log" 2>&1 ||
    { tail -5 "$root/$r.eval.log"; exit 1; }
done
args=()
for r in "${runs[@]}"; do args+=("$root/$r"); done
echo $(($(cat "$wall_file" 2>/dev/null || echo 0) + SECONDS - t_all)) >"$wall_file.tmp" && mv "$wall_file.tmp" "$wall_file"
# The whole attack at one of these σ (studies/content/sigma_chain.sh), where it has run, stays on the page.
cmd="bash studies/content/sigma_bow.sh $RUN ${SIGMAS[*]}"
for d in "$root/$name"-sigma-*; do
  [[ -f $d/eval/results.json ]] || continue
  args+=(--chain "$d")
  cmd+="; bash studies/content/sigma_chain.sh $RUN ${d##*-sigma-}"
  [[ -d $d/guided-noisy/final ]] && cmd+="; bash studies/content/sigma_chain.sh $RUN ${d##*-sigma-} --guided"
done
python3 studies/content/sigma_bow.py "${args[@]}" --total-seconds "$(cat "$wall_file")" --out results/content_sigma \
  --command "$cmd"
