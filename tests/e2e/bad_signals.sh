#!/usr/bin/env bash
# Issue 14, "Signals and dead ranks": SIGTERM and SIGUSR1 to mpirun (2 ranks) both checkpoint and exit 75 (a Slurm
# requeue keys off 75); after kill -9 of mpirun the ranks exit promptly instead of lingering.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
D=$BUILD/daei
T=$(mktemp -d /tmp/daei-e2e-sig.XXXXXX)
trap 'rm -rf "$T"' EXIT
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
common=(--set run.root="$T" --set train.synthetic_rows=4096 --set train.synthetic_dim=16 --set dae.hidden=32
        --set dae.depth=1 --set stage1.batch_size=16 --set stage1.steps=1000000 --set stage1.eval_every=0
        --set stage1.warmup_steps=2 --set train.ckpt_every=1000000 --set train.log_every=1)
fail() { echo "FAIL: $*"; exit 1; }
wait_metrics() {
  for _ in $(seq 300); do [[ -s $1 ]] && return 0; sleep 0.1; done
  fail "no metrics in 30 s ($1)"
}

for sig in TERM USR1; do
  echo "== SIG$sig to mpirun -np 2 during stage 1"
  "${MPIRUN[@]}" -np 2 "$D" train --stage 1 "${common[@]}" --set run.name="$sig" >"$T/$sig.log" 2>&1 &
  pid=$!
  wait_metrics "$T/$sig/stage1/metrics.jsonl"
  kill -"$sig" $pid
  set +e; wait $pid; rc=$?; set -e
  [[ $rc == 75 ]] || { cat "$T/$sig.log"; fail "SIG$sig to mpirun gave exit $rc, want 75"; }
  ls -d "$T/$sig"/stage1/ckpt-*/DONE >/dev/null || { cat "$T/$sig.log"; fail "no DONE checkpoint after SIG$sig"; }
done

echo "== kill -9 of mpirun: the ranks leave within 2 s"
"${MPIRUN[@]}" -np 2 "$D" train --stage 1 "${common[@]}" --set run.name=k9 >"$T/k9.log" 2>&1 &
pid=$!
wait_metrics "$T/k9/stage1/metrics.jsonl"
ranks=$(pgrep -P $pid -d ' ' daei || true)
[[ -n $ranks ]] || fail "no rank processes under mpirun $pid"
kill -9 $pid
t0=$(date +%s.%N)
for _ in $(seq 100); do
  alive=0
  for r in $ranks; do  # a zombie (exited, not yet reaped by the new parent) counts as gone
    st=$(awk '{print $3}' "/proc/$r/stat" 2>/dev/null || echo X)
    [[ $st != X && $st != Z ]] && alive=1
  done
  [[ $alive == 0 ]] && break
  sleep 0.05
done
t=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$t0" "$(date +%s.%N)")
[[ $alive == 0 ]] || { for r in $ranks; do kill -9 "$r" 2>/dev/null || true; done; fail "ranks alive 5 s after kill -9 of mpirun"; }
echo "ranks gone ${t} s after kill -9 of mpirun"
python3 -c "import sys; assert float(sys.argv[1]) < 2.0, sys.argv[1]" "$t" || fail "ranks took $t s to leave"
echo "ok"
