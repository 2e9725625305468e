#!/usr/bin/env bash
# The SURE step, daei (C++) vs the Python reference, one run, paper sizes; writes results/sure_step.md.
#   bash bench/sure_step.sh [build dir]   (extra flags for both, e.g. STEPS=3)
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
STEPS=${STEPS:-5}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
t0=$(date +%s)
cpp=$("$BUILD"/bench_sure_bench --steps "$STEPS")
py=$(/usr/bin/python3 bench/sure_reference.py --steps "$STEPS")
t1=$(date +%s)
mkdir -p results
{
  echo "# SURE step: daei C++ vs Python reference"
  echo
  echo "- command: \`bash bench/sure_step.sh\` (STEPS=$STEPS; OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1, 1 torch thread)"
  echo "- git revision: $(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- src bench || echo ' (+ uncommitted changes)')"
  echo "- machine: $(nproc --all) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), BLAS $(readlink -f /etc/alternatives/libblas.so.3-x86_64-linux-gnu 2>/dev/null || echo '?')"
  echo "- wall time: $((t1 - t0)) s; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (shared machine)"
  echo "- sizes: d 768, H 1024, depth 3, batch 256, K 5; one step = forward + divergence + backward + AdamW; median of $STEPS steps after one warm-up step"
  echo
  echo "| implementation | divergence | median s/step | min s/step |"
  echo "|---|---|---|---|"
  printf '%s\n%s\n' "$cpp" "$py" | /usr/bin/python3 -c '
import json, sys
for l in sys.stdin:
    if l.strip():
        j = json.loads(l); print("| %s | %s | %.3f | %.3f |" % (j["impl"], j["divergence"], j["median_s"], j["min_s"]))'
} > results/sure_step.md
cat results/sure_step.md
