#!/usr/bin/env bash
# The linear probe (issue 65 item 2) on the contextual stand-in: does a GTR-like encoder trained here carry the words
# of its texts, clean and at the σ its release would use?
#   bash studies/content/probe_contextual.sh
# 1. The stand-in (studies/contextual_embedder/run.sh, configs/contextual-embedder.yaml), when missing.
# 2. Its release report (`daei release-report`, the quickstart's rule: the largest σ on the grid whose recall@1 among
#    2,000 test texts stays >= 0.90), chosen before anything is trained on the release: results/release_sigma_contextual.
# 3. Its caches at that σ (runs/ctx-probe; corpus and tokenizer linked from the stand-in's run), then the probe
#    (bow.depth 0, the quickstart's bow.* budget) on clean embeddings (probe-clean, a reference) and on the release
#    (probe-noisy), two at once on a rank each, and `daei eval` of them on the test split beside both floors; then
#    the same with one hidden layer (bow-clean, bow-noisy; runs/ctx-bow). Finished stages are skipped.
# 4. results/content_probes.{md,json} (studies/content/probes.py): the probes of MiniLM (results/content.json) and of
#    the stand-in side by side.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
D=build/daei
E=runs/contextual-embedder
R=runs/ctx-probe
CONFIG=configs/contextual-frontier.yaml
# shellcheck source=studies/common/mpi.bash
source studies/common/mpi.bash
t_all=$SECONDS
[[ -d $E/embedder/final/st ]] || bash studies/contextual_embedder/run.sh
mkdir -p "$R"
for d in corpus tokenizer; do [[ -e $R/$d ]] || ln -s "$(realpath "$E/$d")" "$R/$d"; done
base=(--config "$CONFIG" --set run.name=ctx-probe)
"$D" release-report "${base[@]}" --out results/release_sigma_contextual >"$R.release.log" 2>&1 ||
  { tail -5 "$R.release.log"; exit 1; }
sigma=$(python3 -c "import json; print(json.load(open('results/release_sigma_contextual.json'))['chosen_sigma'])")
echo "probe_contextual: the stand-in's release σ = $sigma (results/release_sigma_contextual.md)"
sets=("${base[@]}" --set embedder.sigma="$sigma" --set reference.enabled=true --set bow.enabled=true
      --set bow.depth=0)
for s in train val test; do
  [[ -f $R/cache/$s/clean/manifest.json ]] || daei_mpi 2 cache build --split "$s" --clean "${sets[@]}" >>"$R.cache.log" 2>&1
done
# RUN DEPTH: bow-clean and bow-noisy at bow.depth DEPTH in RUN (linking ctx-probe's caches), two at once, then eval.
rows() {
  local run=$1 depth=$2 p1 p2 ok=0 t0=$SECONDS trained=0
  local at=("${sets[@]}" --set run.name="$run" --set bow.depth="$depth")
  mkdir -p "runs/$run"
  for d in corpus tokenizer cache; do [[ -e runs/$run/$d ]] || ln -s "$(realpath "$R/$d")" "runs/$run/$d"; done
  [[ -f runs/$run/bow-clean/final/DONE && -f runs/$run/bow-noisy/final/DONE ]] || trained=1
  [[ -f runs/$run/bow-clean/final/DONE ]] || daei_mpi 1 train --stage bow-clean "${at[@]}" >"runs/$run.bow-clean.log" 2>&1 &
  p1=$!
  [[ -f runs/$run/bow-noisy/final/DONE ]] || daei_mpi 1 train --stage bow-noisy "${at[@]}" >"runs/$run.bow-noisy.log" 2>&1 &
  p2=$!
  wait "$p1" || ok=1
  wait "$p2" || ok=1
  ((ok == 0)) || { tail -5 "runs/$run".bow-*.log; exit 1; }
  ((trained == 0)) || echo $((SECONDS - t0)) >"runs/$run.train_s"
  "$D" eval "${at[@]}" --set eval.sweep=false --set eval.per_round=false --set zsinvert.enabled=false \
    >"runs/$run.eval.log" 2>&1 || { tail -5 "runs/$run.eval.log"; exit 1; }
}
rows ctx-probe 0  # the probe
rows ctx-bow 1    # the bag of words (one hidden layer): what a non-linear read-out adds
python3 studies/content/probes.py "$R" --bow runs/ctx-bow --stand-in-seconds "$(cat "$R.train_s")" \
  --bow-seconds "$(cat runs/ctx-bow.train_s)" --total-seconds $((SECONDS - t_all)) \
  --out results/content_probes --command "bash studies/content/probe_contextual.sh"
