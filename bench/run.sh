#!/usr/bin/env bash
# All benchmark entries of issue 15 in one run: writes bench/results.json and bench/results.md (--quick: small
# sizes, a couple of minutes, bench/results-quick.{json,md}; a smoke test, its figures mean nothing).
#   bash bench/run.sh [--quick] [--build DIR] [--only ENTRY,...] [--out DIR]
#   bash bench/run.sh --peers [FLAGS]: daei against the peers' own code instead (bench/peers/run.sh, issue 66)
# Threads are pinned: 1 torch thread, OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1 in every process.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == --peers ]]; then
  shift
  exec bash bench/peers/run.sh "$@"
fi
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
exec /usr/bin/python3 bench/runner.py "$@"
