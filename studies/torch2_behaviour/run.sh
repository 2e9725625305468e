#!/usr/bin/env bash
# Behaviour of the libtorch 1.13 build against the libtorch 2.x build on the toy pipeline (issue 62 item 3), number
# by number: launch/behaviour_check.sh with both runs kept, then studies/torch2_behaviour/compare.py.
#   bash studies/torch2_behaviour/run.sh [OLD_BINARY] [NEW_BINARY]   (default build-torch1.13/daei build/daei)
# Writes results/torch2_behaviour.md (command, revision, machine, wall time at its head). The check's own verdict
# (identical or not) is in the page; the study exits 0 once the page is written.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
OLD=${1:-build-torch1.13/daei}
NEW=${2:-build/daei}
for b in "${OLD}" "${NEW}"; do
  [[ -x ${b} ]] || { echo "torch2_behaviour: ${b}: no such binary (launch/build.sh, launch/build.sh --debian-torch)" >&2; exit 2; }
done
KEEP=$(mktemp -d)
trap 'rm -rf "${KEEP}"' EXIT
t0=$(date +%s)
verdict="identical"
BEHAVIOUR_KEEP=${KEEP} launch/behaviour_check.sh "${OLD}" "${NEW}" >"${KEEP}/check.log" 2>&1 || verdict="not identical"
wall=$(($(date +%s) - t0))
label() { "$1" --version | sed -n 's/^libtorch \([^,]*\),.*/libtorch \1/p'; }
old_label=$(label "${OLD}")
new_label=$(label "${NEW}")
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | sed -n 1p)
bf16=$(grep -o -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ' || true)
rev=$(git rev-parse --short HEAD)
head="# Toy pipeline: ${old_label} build against ${new_label} build

- command: \`bash studies/torch2_behaviour/run.sh ${OLD} ${NEW}\` (launch/behaviour_check.sh, both runs kept, then compare.py)
- revision ${rev}; $(${OLD} --version | sed -n 1p) against $(${NEW} --version | sed -n 1p)
- machine: ${cpu}, $(nproc) vCPUs, bf16 ISA: ${bf16:-none}; $(date -u '+%Y-%m-%d %H:%M') UTC; wall time ${wall} s (both pipelines, 2 ranks each)
- launch/behaviour_check.sh verdict: **${verdict}** (results.json without timing and revision fields, the files written, every safetensors file and samples.md, byte for byte)"
/usr/bin/python3 studies/torch2_behaviour/compare.py "${KEEP}" --old-label "${old_label}" --new-label "${new_label}" \
  --head "${head}" --out results/torch2_behaviour.md
echo "torch2_behaviour: ${verdict}; results/torch2_behaviour.md"
