#!/usr/bin/env bash
# The contextual embedder (a GTR stand-in, src/stages/recipes/sentence_embedder.h) from nothing, with configs/contextual-embedder.yaml:
#   corpus build → GloVe caches of train and val (the texts the stages read; val for the held-out metrics) →
#   pretrain (T5 span corruption; trains the run's SentencePiece tokenizer first) → train --stage embedder.
# Each step skips what is complete (re-running resumes). Afterwards runs/contextual-embedder/embedder/final/st/ is a
# sentence-transformers directory (embedder.kind: t5, embedder.model: that folder) and final/report.json its test
# recall@1. NP ranks (default 2) through launch/mpirun.sh; CONFIG overrides the config file.
#   bash studies/contextual_embedder/run.sh            (about 15 min of training on 2 cores, plus the data steps)
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${CONFIG:-configs/contextual-embedder.yaml}
NP=${NP:-2}
D=${DAEI:-build/daei}
R=runs/contextual-embedder
[[ -x $D ]] || bash launch/build.sh --target daei
step() { local t0=$SECONDS; "$@"; echo "[contextual-embedder] $* : $((SECONDS - t0)) s"; }
[[ -f $R/corpus/stats.json ]] || step "$D" corpus build --config "$CONFIG"
for split in train val; do
  [[ -f $R/cache/$split/manifest.json ]] || step bash launch/mpirun.sh "$NP" cache build --split "$split" --config "$CONFIG"
done
step bash launch/mpirun.sh "$NP" train --stage pretrain --config "$CONFIG" --resume
step bash launch/mpirun.sh "$NP" train --stage embedder --config "$CONFIG" --resume
cat "$R/embedder/final/report.json"
echo "[contextual-embedder] exported: $PWD/$R/embedder/final/st"
