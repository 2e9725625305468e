#!/usr/bin/env bash
# Speed of two daei builds side by side (issue 62 item 4): every entry of bench/run.sh whose daei side is a command of
# a build's bench binaries (bench/runner.py's DaeiSide: the same commands and sizes), run with build A and build B
# alternately A, B, A, B, ... for N rounds; medians, and a ratio where > 1 always means B slower (time B/A, rate A/B),
# with [min, max] over the rounds and a verdict (ok at <= 1.05, else slower). Peak RSS rows are reported, not judged.
#   bash bench/torch_compare.sh [--a DIR] [--b DIR] [--rounds N] [--quick] [--only ENTRY,...] [--out FILE.md]
#   --a DIR        build A, default build-torch1.13 (Debian's libtorch 1.13)
#   --b DIR        build B, default build (the torch wheel's libtorch 2.x)
#   --rounds N     alternations, default 3 (1 with --quick)
#   --quick        runner.py's small sizes (a smoke test: its figures mean little)
#   --only LIST    entries, spec names or runner.py groups (stage2_levers, eval_loops, allreduce, ...), comma-separated
#   --out FILE.md  default bench/torch_compare.md (--quick: bench/torch_compare-quick.md); per-round figures in FILE.json
# The markdown starts with the command, git revision, CPU (and its avx512_bf16/amx_bf16 flags: bf16 entries run only
# where one is present), each build's `daei --version`, wall time. A bench binary missing in a build, or a run that
# fails, is listed as "not run: <reason>". A missing --a/--b folder: one line on stderr, exit 2.
# Paths are relative to the repository. Threads are pinned: OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1, MKL_NUM_THREADS=1.
set -euo pipefail
for arg in "$@"; do
  if [[ $arg == --help || $arg == -h ]]; then
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 0
  fi
done
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
exec /usr/bin/python3 bench/torch_compare.py "$@"
