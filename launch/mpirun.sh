#!/usr/bin/env bash
# Run a daei subcommand on N local ranks: launch/mpirun.sh N SUBCOMMAND [args...]
# One torch/BLAS thread per rank was fastest here (DESIGN.md). As root OpenMPI needs --allow-run-as-root.
set -euo pipefail
cd "$(dirname "$0")/.."
np=${1:?usage: launch/mpirun.sh NP SUBCOMMAND [args...]}; shift
extra=(); [[ $(id -u) -eq 0 ]] && extra+=(--allow-run-as-root)
exec mpirun "${extra[@]}" --oversubscribe --bind-to none -np "$np" \
  -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 build/daei "$@"
