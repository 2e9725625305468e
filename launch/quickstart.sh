#!/usr/bin/env bash
# Installs, builds and runs the whole pipeline on the embedded default (GloVe-100d, WordNet + SOTU, sigma 0.04).
# Re-running resumes: every step skips what is complete.
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/setup.sh
bash launch/build.sh
CONFIG=${CONFIG:-configs/quickstart.yaml}
NP=${NP:-2}
D=build/daei
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 -np "$NP")
has() { "$D" --help | grep -qE "^  $1 "; }
step() { echo; echo "=== $*"; }
missing=()

if has corpus; then step "corpus build"; "$D" corpus build --config "$CONFIG"; else missing+=("corpus build"); fi
if has cache; then
  step "cache build (noisy train/val/test, offline-eval clean val/test)"
  "${MPIRUN[@]}" "$D" cache build --config "$CONFIG" --split train
  for s in val test; do "${MPIRUN[@]}" "$D" cache build --config "$CONFIG" --split "$s" --clean; done
else missing+=("cache build"); fi
if has train; then
  step "stage 1: SURE-trained DAE ($NP ranks)"
  "${MPIRUN[@]}" "$D" train --config "$CONFIG" --stage 1 --resume
else missing+=("train"); fi
if has eval; then step "DAE table"; "$D" eval --config "$CONFIG" --dae-only; else missing+=("eval"); fi

if ((${#missing[@]})); then
  echo
  echo "quickstart: not built yet, skipped: ${missing[*]}"
fi
