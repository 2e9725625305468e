#!/usr/bin/env bash
# The quickstart's whole attack (the T5 chain: DAE, inverters, correctors) at another σ, beside the bag of words there.
#   bash studies/content/sigma_chain.sh RUN_DIR SIGMA     (after studies/content/sigma_bow.sh RUN_DIR ... SIGMA)
# Runs `daei pipeline` with configs/quickstart.yaml at embedder.sigma SIGMA in runs/NAME-sigma-SIGMA, linking RUN's
# corpus and tokenizer and the release's answers at that σ split by split from runs/NAME-bow-sigma-SIGMA (so every
# row is scored on the same test texts as bow-noisy there); RUN's train.precision; no clean reference, zsinvert, noise
# sweep or per-round tables; test split only (seeds.sh's settings). Then results/content_sigma.{md,json} again with
# the chain's rows beside the bag of words at that σ. About 15 min on 2 cores.
#   bash studies/content/sigma_chain.sh RUN_DIR SIGMA --guided
# once the above has run: guided-noisy with the copy gate (guided.copy; stages/recipes/guided.h: 2 fold models at
# bow.*'s budget for the training rows' guides, then stage 2's budget) on one rank, reading the bow-noisy of
# NAME-bow-sigma-SIGMA (linked), then eval and the page again. About 25 min on one core.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN=${1:?usage: sigma_chain.sh RUN_DIR SIGMA}
S=${2:?usage: sigma_chain.sh RUN_DIR SIGMA}
[[ $S =~ ^0?\.[0-9]*[1-9][0-9]*$ ]] || { echo "sigma_chain: $S: not a σ in (0, 1)" >&2; exit 2; }
GUIDED=''
case ${3:-} in
  "") ;;
  --guided) GUIDED=1 ;;
  *) echo "sigma_chain: ${3}: unknown option (--guided)" >&2; exit 2 ;;
esac
CONFIG=${CONFIG:-configs/quickstart.yaml}
D=build/daei
NP=${NP:-2}
root=$(dirname "$RUN")
name=$(basename "$RUN")
B=$root/$name-bow-sigma-$S
[[ -f $B/cache/test/clean/manifest.json && -f $B/cache/train/manifest.json && -f $B/cache/val/manifest.json ]] ||
  { echo "sigma_chain: $B has no release answers at σ $S (run studies/content/sigma_bow.sh $RUN $S first)" >&2; exit 2; }
precision=fp32
last=$(awk '/\[precision\]/ {l = $0} END {print l}' "$RUN/daei.log" 2>/dev/null || true)
[[ $last == *"[precision] bf16"* ]] && precision=bf16
dir=$root/$name-sigma-$S
mkdir -p "$dir/cache"
for f in corpus tokenizer; do [[ -e $dir/$f ]] || ln -s "$(realpath "$RUN/$f")" "$dir/$f"; done
for c in train val test; do [[ -e $dir/cache/$c ]] || ln -s "$(realpath "$B/cache/$c")" "$dir/cache/$c"; done
# shellcheck source=studies/common/mpi.bash
source studies/common/mpi.bash
at=(--config "$CONFIG" --set run.root="$root" --set run.name="$name-sigma-$S" --set embedder.sigma="$S"
    --set train.precision="$precision" --set reference.enabled=false --set cache.clean_train_reference=false
    --set zsinvert.enabled=false --set eval.sweep=false --set eval.per_round=false --set 'eval.splits=[test]')
t0=$SECONDS
if [[ -z $GUIDED ]]; then
  echo "sigma_chain: $dir (embedder.sigma $S, train.precision $precision), log $dir.log"
  daei_mpi "$NP" pipeline "${at[@]}" >"$dir.log" 2>&1 || { tail -5 "$dir.log"; exit 1; }
  echo $((SECONDS - t0)) >"$dir.wall_s"
else
  [[ -f $dir/eval/results.json && -d $B/bow-noisy/final ]] ||
    { echo "sigma_chain: --guided needs $dir's pipeline and $B/bow-noisy (run the first form first)" >&2; exit 2; }
  [[ -e $dir/bow-noisy ]] || ln -s "$(realpath "$B/bow-noisy")" "$dir/bow-noisy"
  at+=(--set bow.enabled=true --set guided.enabled=true --set guided.copy=true)
  if [[ ! -d $dir/guided-noisy/final ]]; then
    echo "sigma_chain: guided-noisy (copy gate) in $dir, log $dir.guided-noisy.log"
    daei_mpi 1 train --stage guided-noisy "${at[@]}" >"$dir.guided-noisy.log" 2>&1 ||
      { tail -5 "$dir.guided-noisy.log"; exit 1; }
    echo $((SECONDS - t0)) >"$dir.guided-noisy.train_s"
  fi
  "$D" eval "${at[@]}" >"$dir.eval.log" 2>&1 || { tail -5 "$dir.eval.log"; exit 1; }
fi
# The page again through sigma_bow.sh over the σ it has run (each finished, so nothing is retrained): it adds every
# run of this script that exists and names the commands.
sigmas=()
for d in "$root/$name"-bow-sigma-*; do [[ -f $d/eval/results.json ]] && sigmas+=("${d##*-bow-sigma-}"); done
bash studies/content/sigma_bow.sh "$RUN" "${sigmas[@]}"
