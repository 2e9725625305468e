#!/usr/bin/env bash
# Two binaries, the same 2-rank training: stage 1 and stage 2 for 30 steps each on the quickstart's corpus, caches and
# tokenizer (linked), then cmp of the two final models. Written for issue 26 item 11 (gradients accumulated in the
# reducer's buckets must train exactly as gradients copied into them). About 1 minute after launch/quickstart.sh.
#   bash studies/refactor_equivalence/reducer_bitwise_check.sh OLD_DAEI NEW_DAEI
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -eq 2 ]] || { echo "usage: $0 OLD_DAEI NEW_DAEI"; exit 2; }
[[ -f runs/quickstart/cache/train/manifest.json ]] || { echo "reducer_bitwise_check: run launch/quickstart.sh first"; exit 1; }
MPI=(mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 -np 2)
[[ $(id -u) -eq 0 ]] && MPI+=(--allow-run-as-root)
for side in old new; do
  D=$2; [[ $side == old ]] && D=$1
  R=runs/bitwise-$side
  rm -rf "$R"
  mkdir -p "$R"
  for l in corpus cache tokenizer; do ln -s "$PWD/runs/quickstart/$l" "$R/$l"; done
  S=(--config configs/quickstart.yaml --set "run.name=bitwise-$side" --set stage1.steps=30 --set stage2.steps=30
     --set train.ckpt_every=1000 --set stage1.eval_every=0 --set stage2.eval_every=0)
  "${MPI[@]}" "$D" train --stage 1 "${S[@]}" >"$R.log" 2>&1
  "${MPI[@]}" "$D" train --stage 2 "${S[@]}" >>"$R.log" 2>&1
done
status=0
for f in stage1/final/dae/model.safetensors stage2/final/inverter/model.safetensors; do
  if cmp -s "runs/bitwise-old/$f" "runs/bitwise-new/$f"; then echo "identical: $f"; else echo "DIFFER: $f"; status=1; fi
done
exit $status
