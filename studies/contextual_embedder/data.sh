#!/usr/bin/env bash
# The contextual embedder's shared data (issue 46), built once in runs/ctxf-data: the embedder itself
# (studies/contextual_embedder/run.sh, when missing), its run's corpus, tokenizer and pretrain T5 (linked: they read the
# training texts alone, with the same config keys, so the attacker's own `daei pretrain` would be the same
# computation), and the caches of every split (noisy, with the clean rows for the references) at the config's σ.
#   studies/contextual_embedder/data.sh            (CONFIG, NP, DAEI as studies/contextual_frontier/run.sh)
# Used by studies/contextual_frontier/run.sh and studies/contextual_replicate/run.sh; run folders link what they read
# from it.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${CONFIG:-configs/contextual-frontier.yaml}
NP=${NP:-2}
D=${DAEI:-build/daei}
E=runs/contextual-embedder
DATA=runs/ctxf-data
[[ -x $D ]] || bash launch/build.sh --target daei
# The embedder has a config of its own (not the CONFIG this script was given).
[[ -d $E/embedder/final/st ]] ||
  CONFIG=configs/contextual-embedder.yaml NP=$NP DAEI=$D bash studies/contextual_embedder/run.sh
mkdir -p "$DATA"
for d in corpus tokenizer pretrain; do [[ -e $DATA/$d ]] || ln -s "../contextual-embedder/$d" "$DATA/$d"; done
ood=$("$D" --config "$CONFIG" --dump-config | awk '/^corpus:/{c=1; next} /^[^ ]/{c=0} c && $1 == "ood:" {print}' |
  tr -d '[],' | awk '{for (i = 2; i <= NF; i++) print "ood-" $i}')
for s in train val test $ood; do
  [[ -f $DATA/cache/$s/clean/manifest.json ]] && continue
  bash launch/mpirun.sh "$NP" cache build --split "$s" --clean --config "$CONFIG" --set run.name=ctxf-data
done
