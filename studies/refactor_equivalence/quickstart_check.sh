#!/usr/bin/env bash
# The quickstart's first steps (corpus, caches, stage 1, stage 2, noisy-inverter) with two binaries, compared byte for
# byte (about 25 min a binary on 2 cores):   studies/refactor_equivalence/quickstart_check.sh OLD_BINARY NEW_BINARY
# Run directories: runs/qs-old, runs/qs-new (same config and seed).
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
[[ $# == 2 ]] || { echo "usage: $0 OLD_BINARY NEW_BINARY" >&2; exit 2; }
cd "$(dirname "$0")/../.."
root=()
[[ $(id -u) -eq 0 ]] && root=(--allow-run-as-root)
first_steps() {  # BINARY NAME
  local B=$1
  local C=(--config configs/quickstart.yaml --set "run.name=$2")
  local M=(mpirun "${root[@]}" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 -np 2 "$B")
  "$B" corpus build "${C[@]}"
  for s in train val test ood-fortunes; do "${M[@]}" cache build "${C[@]}" --split "$s" --clean; done
  for st in 1 2 noisy-inverter; do "${M[@]}" train --stage "$st" "${C[@]}"; done
}
first_steps "$1" qs-old
first_steps "$2" qs-new
status=0
for f in corpus/train.jsonl corpus/val.jsonl corpus/test.jsonl stage1/final/dae/model.safetensors stage1/final/dae/dae.json \
         $(cd runs/qs-old && find stage2/final noisy-inverter/final -type f | sort); do
  if cmp -s "runs/qs-old/$f" "runs/qs-new/$f"; then echo "identical: $f"; else echo "DIFFERS: $f"; status=1; fi
done
exit $status
