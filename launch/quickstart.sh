#!/usr/bin/env bash
# Installs, builds and runs the whole DAEI attack on the embedded default (all-MiniLM-L6-v2 + N(0, 0.18²), WordNet +
# GCIDE)
# with `daei pipeline` on 2 ranks, then prints the results table. Re-running resumes: every step skips what is
# complete and resumes what is partial.
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/setup.sh
bash launch/build.sh --target daei  # the program only; launch/test.sh builds the tests
CONFIG=${CONFIG:-configs/quickstart.yaml}
NP=${NP:-2}
ROOT_FLAGS=()
[[ $(id -u) -eq 0 ]] && ROOT_FLAGS=(--allow-run-as-root)
mpirun "${ROOT_FLAGS[@]}" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 -np "$NP" \
  build/daei pipeline --config "$CONFIG"
# The run folder from the resolved config. awk reads all of daei's output (no `exit`): under pipefail an early exit
# would kill daei's next write with SIGPIPE and end this script with 141 after a complete run.
config_value() { build/daei --config "$CONFIG" --dump-config | awk -v k="$1" '/^run:/{r=1} r && $1 == k":" && !v {v=$2} END{print v}'; }
name=$(config_value name)
root=$(config_value root)
echo
cat "${root:-runs}/${name:-quickstart}/eval/results.md"
