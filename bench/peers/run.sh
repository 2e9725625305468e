#!/usr/bin/env bash
# daei against the peers' own code (issue 66): Hugging Face transformers' T5 (train step fp32 and bf16, greedy and
# beam generate()), the DAEI public code's SURE step, sentence-transformers' encode. Paired rounds, 1 thread a
# process, both allocator settings; prints the table (ratios, outputs' agreement, versions, CPU and its bf16 ISA)
# and writes results/peers_bench.{json,md} (--out elsewhere).
#   bash bench/peers/run.sh [--rounds 5] [--quick] [--only ENTRY,...] [--malloc both|tuned|default] [--out PATH]
#   bash bench/run.sh --peers [same flags]
# Needs the peers' venv (bash bench/peers/setup.sh) and build/bench_peers, build/bench_embed_bench, build/bench_entries
# (flock /tmp/daei-build.lock cmake --build build --target bench_peers bench_embed_bench bench_entries).
# Entries and flags: bench/peers/run.py --help.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=$(bash bench/peers/setup.sh --check | tail -1) ||
  { echo "peers: no venv with the pinned peers; run: bash bench/peers/setup.sh" >&2; exit 1; }
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
exec "$PY" bench/peers/run.py "$@"
