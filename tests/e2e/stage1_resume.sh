#!/usr/bin/env bash
# daei train --stage 1 on synthetic rows (train.synthetic_rows): 2 ranks stop at step 5 (exit 75, DONE checkpoint)
# and resume on 3 ranks; that matches a 3-rank run stopped and resumed at the same step. SIGUSR1 mid-run → exit 75
# with a DONE checkpoint. `daei eval --dae-only` writes eval/dae.json.
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$1
D=$BUILD/daei
e2e_tmp
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
common=(--set run.root="$T" --set train.synthetic_rows=240 --set train.synthetic_dim=16 --set dae.hidden=32
        --set dae.depth=2 --set stage1.batch_size=12 --set stage1.steps=10 --set stage1.eval_every=5
        --set stage1.warmup_steps=2 --set train.ckpt_every=100)
expect() {
  local want=$1; shift
  set +e; "$@" >"$T/last.log" 2>&1; local rc=$?; set -e
  [[ $rc == "$want" ]] || { cat "$T/last.log"; echo "FAIL: exit $rc, want $want: $*"; exit 1; }
}

expect 75 "${MPIRUN[@]}" -np 2 "$D" train --stage 1 "${common[@]}" --set run.name=a --set train.stop_after=5
[[ -f $T/a/stage1/ckpt-00000005/DONE ]] || { echo "FAIL: no DONE checkpoint at step 5"; exit 1; }
expect 0 "${MPIRUN[@]}" -np 3 "$D" train --stage 1 "${common[@]}" --set run.name=a --resume
grep -q "written by 2 ranks, now 3" "$T/last.log" || { cat "$T/last.log"; echo "FAIL: no 2 → 3 resume line"; exit 1; }
expect 75 "${MPIRUN[@]}" -np 3 "$D" train --stage 1 "${common[@]}" --set run.name=b --set train.stop_after=5
expect 0 "${MPIRUN[@]}" -np 3 "$D" train --stage 1 "${common[@]}" --set run.name=b --resume
/usr/bin/python3 - "$T/a/stage1/final/dae/model.safetensors" "$T/b/stage1/final/dae/model.safetensors" <<'PY'
import json, struct, sys
import numpy as np
def load(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]], dtype=np.float32)
            for k, v in h.items() if k != '__metadata__'}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys()
d = max(float(np.abs(a[k] - b[k]).max()) for k in a)
print(f"resume 2 -> 3 ranks vs 3-rank continuation: max |delta| = {d:.3g}")
assert d <= 1e-5, d
PY
# A completed stage is skipped.
expect 0 "$D" train --stage 1 "${common[@]}" --set run.name=b
grep -q "is complete; nothing to do" "$T/last.log" || { cat "$T/last.log"; echo "FAIL: completed stage not skipped"; exit 1; }

# SIGUSR1 mid-run (one process, no mpirun in between).
"$D" train --stage 1 "${common[@]}" --set run.name=c --set stage1.steps=100000 --set stage1.eval_every=0 \
  >"$T/c.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [[ -s $T/c/stage1/metrics.jsonl ]] && break; sleep 0.2; done
kill -USR1 $pid
set +e; wait $pid; rc=$?; set -e
[[ $rc == 75 ]] || { cat "$T/c.log"; echo "FAIL: SIGUSR1 gave exit $rc, want 75"; exit 1; }
ls -d "$T"/c/stage1/ckpt-*/DONE >/dev/null || { echo "FAIL: no DONE checkpoint after SIGUSR1"; exit 1; }

expect 0 "$D" eval --dae-only "${common[@]}" --set run.name=b
/usr/bin/python3 - "$T/b/eval/dae.json" <<'PY'
import json, math, sys
d = json.load(open(sys.argv[1]))
t = d["dae"]["test"]
print(t)
# Synthetic rows of dimension 16 at sigma 0.04: E||y - x||^2 = 16 * 0.04^2 = 0.0256.
assert abs(t["mse_noisy"] - 0.0256) < 0.2 * 0.0256, t["mse_noisy"]
assert math.isfinite(t["mse_dae"]) and 0 < t["mse_dae"] < 2 * t["mse_noisy"], t["mse_dae"]
assert t["mse_wiener_noisy_only"] < t["mse_noisy"], "the noisy-only Wiener filter must beat the noisy input"
assert "val" in t["oracle_fitted_on"] or "train" in t["oracle_fitted_on"], t["oracle_fitted_on"]
assert d["dae"]["synthetic_rows"] == 240, "results from synthetic rows must say so"
PY
grep -q "^\*\*Synthetic rows (train.synthetic_rows = 240)" "$T/last.log" || { cat "$T/last.log"; echo "FAIL: table not labelled synthetic"; exit 1; }
grep -q "\[data\] train.synthetic_rows = 240" "$T/c.log" || { echo "FAIL: no [data] warning for synthetic rows"; exit 1; }
echo "stage1_resume: OK"
