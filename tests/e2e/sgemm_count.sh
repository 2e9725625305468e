#!/usr/bin/env bash
# bench/sgemm_count.c counts and times the sgemm_ calls of a Python/libtorch process by shape (the notes' GEMM-by-GEMM
# figures rest on it): two known products give their column-major shapes, call counts and FLOPs.
set -uo pipefail
SRC=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
gcc -O2 -Wall -Werror -shared -fPIC "$SRC/bench/sgemm_count.c" -o "$t/shim.so" -ldl || { echo "FAIL: the shim does not build"; exit 1; }
# (64×32)·(32×16) three times: row-major torch is column-major sgemm_('N','N', M=16, N=64, K=32);
# (8×40)·(16×40)ᵀ once: sgemm_('T','N', M=16, N=8, K=40)
SGEMM_COUNT_OUT="$t/r.txt" LD_PRELOAD="$t/shim.so" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 /usr/bin/python3 -c '
import torch
a, b = torch.randn(64, 32), torch.randn(32, 16)
for _ in range(3): torch.mm(a, b)
torch.mm(torch.randn(8, 40), torch.randn(16, 40).t())
' || { echo "FAIL: python under the shim exited $?"; exit 1; }
/usr/bin/python3 - "$t/r.txt" "$SRC" <<'PY'
import re, sys
sys.path.insert(0, sys.argv[2] + "/bench")
import sgemm_compare
rows = sgemm_compare.load(sys.argv[1])
fails = 0
for shape, calls in ((("NN", 16, 64, 32), 3), (("TN", 16, 8, 40), 1)):
    got = rows.get(shape)
    if not got or got[0] != calls or got[1] <= 0:
        print("FAIL: shape %s: want %d calls with a time, got %s" % (shape, calls, got)); fails += 1
head = open(sys.argv[1]).readline()
m = re.match(r"total ([0-9.]+) s, ([0-9.]+) GFLOP", head)
want = (3 * 2 * 16 * 64 * 32 + 2 * 16 * 8 * 40) / 1e9
if not m or abs(float(m.group(2)) - round(want, 3)) > 1e-3:
    print("FAIL: total line %r, want %.3f GFLOP" % (head, want)); fails += 1
print("sgemm_count: %d shapes, %d failures" % (len(rows), fails))
sys.exit(1 if fails else 0)
PY
rc=$?
# hostile inputs: a damaged report, a missing one, an unwritable output path: one line each, no traceback
printf 'total 1 s, 1 GFLOP, 1 GFLOP/s, 1 shapes\nNN 1 2\n' > "$t/bad.txt"
for args in "$t/bad.txt $t/bad.txt" "$t/missing.txt $t/bad.txt"; do
  # shellcheck disable=SC2086
  out=$(/usr/bin/python3 "$SRC/bench/sgemm_compare.py" $args 2>&1); st=$?
  if [[ $st -ne 1 || $(printf '%s\n' "$out" | wc -l) -ne 1 || $out != sgemm_compare:* ]]; then
    echo "FAIL: sgemm_compare $args: exit $st, want 1 and one line; got: $out"; rc=1
  fi
done
out=$(SGEMM_COUNT_OUT=/nonexistent-dir/r.txt LD_PRELOAD="$t/shim.so" /usr/bin/python3 -c 'import torch; torch.mm(torch.randn(4, 4), torch.randn(4, 4))' 2>&1)
[[ $out == "sgemm_count: cannot write /nonexistent-dir/r.txt; no report" ]] || { echo "FAIL: unwritable report path: $out"; rc=1; }
exit $rc
