#!/usr/bin/env bash
# Preemption on one machine, 2 ranks of `daei train --stage 1`: a stop signal in the middle of the run gives exit 75
# and a DONE checkpoint, the same command with --resume finishes, and the final weights are bitwise those of an
# uninterrupted 2-rank run. Signals: USR1 to mpirun itself (mpirun forwards it to the ranks), and TERM to
# launch/mpirun.sh (its trap passes it on as USR1; mpirun would answer a TERM of its own by killing the ranks).
# tests/e2e/stage1_resume.sh covers train.stop_after, a change of world size and USR1 to a lone process.
set -euo pipefail
BUILD=$1
SRC=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
D=$BUILD/daei
T=$(mktemp -d)
bg=""
cleanup() {  # only processes this test started, by pid
  if [[ -n $bg ]] && kill -0 "$bg" 2>/dev/null; then
    pkill -KILL -P "$bg" 2>/dev/null || true
    kill -KILL "$bg" 2>/dev/null || true
  fi
  rm -rf "$T"
}
trap cleanup EXIT
STEPS=${STEPS:-150}
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
LAUNCH=(env DAEI="$D" bash "$SRC/launch/mpirun.sh" 2)
common=(--set run.root="$T" --set train.synthetic_rows=4096 --set train.synthetic_dim=32 --set dae.hidden=64
        --set dae.depth=2 --set stage1.batch_size=64 --set stage1.steps="$STEPS" --set stage1.warmup_steps=5
        --set stage1.eval_every=0 --set train.log_every=5 --set train.ckpt_every=100000)
expect() {  # WANT LOG cmd...
  local want=$1 log=$2; shift 2
  local rc=0
  "$@" >"$log" 2>&1 || rc=$?
  [[ $rc == "$want" ]] || { cat "$log"; echo "FAIL: exit $rc, want $want: $*"; exit 1; }
}

t0=$SECONDS
expect 0 "$T/ref.log" "${LAUNCH[@]}" train --stage 1 "${common[@]}" --set run.name=ref
echo "mpirun_preempt: uninterrupted run of $STEPS steps: $((SECONDS - t0)) s"

interrupt() {  # NAME SIGNAL TARGET(mpirun|script)
  local name=$1 sig=$2 target=$3 log=$T/$1.log
  if [[ $target == mpirun ]]; then
    "${MPIRUN[@]}" -np 2 "$D" train --stage 1 "${common[@]}" --set run.name="$name" >"$log" 2>&1 &
  else
    "${LAUNCH[@]}" train --stage 1 "${common[@]}" --set run.name="$name" >"$log" 2>&1 &
  fi
  bg=$!
  local m=$T/$name/stage1/metrics.jsonl
  for _ in $(seq 600); do [[ -s $m ]] && break; kill -0 "$bg" 2>/dev/null || break; sleep 0.1; done
  [[ -s $m ]] || { cat "$log"; echo "FAIL: $name: no metrics line within 60 s"; exit 1; }
  kill "-$sig" "$bg"
  local rc=0
  wait "$bg" || rc=$?
  bg=""
  [[ $rc == 75 ]] || { cat "$log"; echo "FAIL: $name: $sig to $target gave exit $rc, want 75"; exit 1; }
  local ck
  ck=$(compgen -G "$T/$name/stage1/ckpt-*/DONE" | sed -n 1p) || { cat "$log"; echo "FAIL: $name: no DONE checkpoint"; exit 1; }
  ck=$(basename "$(dirname "$ck")")
  [[ ! -e $T/$name/stage1/final ]] || { echo "FAIL: $name: the run finished before the signal; raise STEPS"; exit 1; }
  expect 0 "$T/$name.resume.log" "${LAUNCH[@]}" train --stage 1 "${common[@]}" --set run.name="$name" --resume
  cmp "$T/ref/stage1/final/dae/model.safetensors" "$T/$name/stage1/final/dae/model.safetensors" ||
    { echo "FAIL: $name: final weights differ from the uninterrupted run"; exit 1; }
  echo "mpirun_preempt: $sig to $target -> exit 75 at $ck -> --resume -> final weights bitwise equal"
}

interrupt usr1-mpirun USR1 mpirun
interrupt term-script TERM script
echo "mpirun_preempt: OK ($((SECONDS - t0)) s)"
