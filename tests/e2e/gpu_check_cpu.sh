#!/usr/bin/env bash
# launch/gpu_check.sh's CPU part (--cpu-only): stage-1 and stage-2 steps run twice on the CPU (dist.backend local,
# then mpi at world size 1; and with train.precision=bf16 where the CPU has it natively), their first losses compared
# by launch/compare_losses.py, the stage-2 tokens/s reported.
# The comparison must pass on equal runs and fail on a perturbed loss; without a CUDA device the plain script says so
# in one line and exits 0.
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$(cd "$1" && pwd); SRC=$(cd "$2" && pwd)
e2e_tmp
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

if ! nvidia-smi -L >/dev/null 2>&1; then
  bash "$SRC/launch/gpu_check.sh" --build "$BUILD" --out "$T/none" >"$T/none.txt" 2>&1 || fail "no device: exit $?"
  [[ $(wc -l <"$T/none.txt") == 1 ]] && grep "no CUDA device" "$T/none.txt" >/dev/null || { cat "$T/none.txt"; fail "no device: not one line"; }
fi

bash "$SRC/launch/gpu_check.sh" --cpu-only --build "$BUILD" --out "$T/gc" >"$T/out.txt" 2>&1 || { cat "$T/out.txt"; fail "--cpu-only exited $?"; }
for s in 1 2; do
  grep -E "^stage $s, cpu-mpi vs cpu: MATCH, max relative difference .* over 5 steps" "$T/out.txt" >/dev/null ||
    { cat "$T/out.txt"; fail "no stage-$s MATCH line"; }
done
grep -E "^stage-2 step s2-cpu-mpi: [0-9]+ tokens/s" "$T/out.txt" >/dev/null || { cat "$T/out.txt"; fail "no tokens/s line"; }
# Where the CPU multiplies bf16 natively: train.precision=bf16 against fp32, stage 1 (fp32 either way) exactly.
if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
  for s in 1 2; do
    grep -E "^stage $s, cpu-bf16 vs cpu: MATCH" "$T/out.txt" >/dev/null || { cat "$T/out.txt"; fail "no stage-$s bf16 MATCH line"; }
  done
  grep -E "^stage 1, cpu-bf16 vs cpu: MATCH, max relative difference 0.00e\+00" "$T/out.txt" >/dev/null ||
    { cat "$T/out.txt"; fail "stage 1 is not fp32 under train.precision=bf16"; }
  # The run's own log says what it multiplied in (the line came before the log file was open until 2026-12-07).
  grep -E "\[precision\] bf16 matrix products" "$T/gc/gc/daei.log" >/dev/null ||
    { grep -n "precision" "$T/gc/gc/daei.log"; fail "no [precision] line in the run's daei.log"; }
fi

# The comparison fails on a loss moved beyond the tolerance, and on a missing step.
ref=$T/gc/s2-cpu/metrics.jsonl
python3 - "$ref" "$T/moved.jsonl" "$T/short.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[2], "w") as f:
    for r in rows:
        if r.get("step") == 3 and "loss" in r:
            r["loss"] *= 1 + 1e-4
        f.write(json.dumps(r) + "\n")
with open(sys.argv[3], "w") as f:
    f.write("".join(json.dumps(r) + "\n" for r in rows if r.get("step") != 4))
PY
cmp_losses() { python3 "$SRC/launch/compare_losses.py" "$ref" "$1" --steps 5 --rtol "$2" >"$T/cmp.txt"; }
cmp_losses "$T/moved.jsonl" 1e-3 || { cat "$T/cmp.txt"; fail "a 1e-4 change fails a 1e-3 tolerance"; }
if cmp_losses "$T/moved.jsonl" 1e-6; then cat "$T/cmp.txt"; fail "a 1e-4 change passes a 1e-6 tolerance"; fi
if cmp_losses "$T/short.jsonl" 1e-3; then cat "$T/cmp.txt"; fail "a missing step passes"; fi
echo "gpu_check --cpu-only: OK ($(sed -n '$p' "$T/out.txt"))"
