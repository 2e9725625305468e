#!/usr/bin/env bash
# Slurm for real: a one-node cluster on this machine (munged, slurmctld, slurmd with a generated slurm.conf in a
# temporary directory, private ports and munge socket) runs launch/slurm/daei.sbatch with 2 tasks on a small
# synthetic stage-1 config:
#   ref  uninterrupted: exit 0, no requeue
#   pre  `scancel --signal=USR1 --batch` mid-run: exit 75, requeued (SLURM_RESTART_COUNT 1 in the log), resumed;
#        final weights bitwise equal to ref's
#   tl   a time limit (cut once training runs) with --signal=B:USR1@5 expires mid-run: exit 75, requeued, resumed from the
#        checkpoint (then cancelled: it is 10^6 steps long)
#   srun --mpi=pmix trains on 2 ranks where `srun --mpi=list` shows pmix; srun without PMI is refused, not run as two
#        lone rank 0s.
# The node is named daei1, not after this host, so mpirun starts its daemon through srun as on a multi-node
# allocation. Fake GPUs (gres gpu, /dev/null-like files) let the script's --gpus-per-task stand. Every daemon is
# stopped on exit. Needs root and the Debian packages munge, slurmctld, slurmd, slurm-client (launch/setup.sh):
# without them it fails under CI=true and skips otherwise.
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$(cd "$1" && pwd)
SRC=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
D=$BUILD/daei
[[ $(id -u) -eq 0 ]] || skip "slurm_preempt needs root (it runs munged, slurmctld and slurmd)"
for c in munged slurmctld slurmd sbatch scontrol squeue scancel sinfo srun mpirun python3; do
  command -v "$c" >/dev/null || skip "slurm_preempt: $c is missing (bash launch/setup.sh installs munge, slurmctld, slurmd, slurm-client)"
done
[[ -x $D ]] || { echo "FAIL: $D is not built"; exit 1; }

T=$(mktemp -d /tmp/daei-slurm.XXXXXX)
chmod 755 "$T"
t_start=$SECONDS
say() { printf '[slurm_preempt %3ds] %s\n' $((SECONDS - t_start)) "$*"; }
stepds_before=$(pgrep -x slurmstepd | sort || true)
daemon_pids=()
cleanup() {
  local rc=$? p left
  set +e
  if [[ -n ${SLURM_CONF:-} ]] && [[ -f $T/slurmctld.pid ]]; then
    squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null
    for _ in $(seq 60); do [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break; sleep 0.5; done
  fi
  for f in slurmd.pid slurmctld.pid munge/munged.pid; do [[ -f $T/$f ]] && daemon_pids+=("$(cat "$T/$f")"); done
  for p in "${daemon_pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 50); do
    left=""
    for p in "${daemon_pids[@]}"; do kill -0 "$p" 2>/dev/null && left+=" $p"; done
    [[ -z $left ]] && break
    sleep 0.2
  done
  for p in $left; do kill -KILL "$p" 2>/dev/null; done
  # Step daemons of our jobs end with their jobs; any new one still here is ours (pids not here before the test).
  for p in $(comm -13 <(echo "$stepds_before") <(pgrep -x slurmstepd | sort)); do
    echo "[slurm_preempt] error: slurmstepd $p outlived its job; killing it"; kill -KILL "$p" 2>/dev/null; rc=1
  done
  if [[ -n $left ]]; then echo "[slurm_preempt] error: daemons$left needed SIGKILL"; rc=1; fi
  if ((rc != 0)); then
    for f in "$T"/log/*.log; do echo "--- $f"; tail -20 "$f"; done
  fi
  rm -rf "$T"
  exit "$rc"
}
trap cleanup EXIT

# --- the cluster -----------------------------------------------------------------------------------------------
host=$(hostname -s)
mkdir -p "$T/munge" "$T/state" "$T/spool" "$T/log" "$T/dev" "$T/runs"
chmod 700 "$T/munge"
head -c 1024 /dev/urandom >"$T/munge/munge.key"
chmod 400 "$T/munge/munge.key"
munged --force --key-file="$T/munge/munge.key" --socket="$T/munge/sock" --pid-file="$T/munge/munged.pid" \
  --log-file="$T/log/munged.log" --seed-file="$T/munge/seed"
read -r port_ctld port_d < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
for i in $(seq 0 7); do ln -s /dev/null "$T/dev/gpu$i"; done
# shellcheck source=launch/slurm/slurm_conf.sh
source "$SRC/launch/slurm/slurm_conf.sh"
slurm_conf "ClusterName=daeitest" "SlurmctldHost=$host(127.0.0.1)" "SlurmctldPort=$port_ctld" "SlurmdPort=$port_d" \
  "AuthInfo=socket=$T/munge/sock" "StateSaveLocation=$T/state" "SlurmdSpoolDir=$T/spool" \
  "SlurmctldPidFile=$T/slurmctld.pid" "SlurmdPidFile=$T/slurmd.pid" "SlurmctldLogFile=$T/log/slurmctld.log" \
  "SlurmdLogFile=$T/log/slurmd.log" "KillWait=10" \
  "NodeName=daei1 NodeHostname=$host NodeAddr=127.0.0.1 CPUs=8 Gres=gpu:8 State=UNKNOWN" \
  "PartitionName=daei Nodes=daei1 Default=YES MaxTime=INFINITE State=UP" >"$T/slurm.conf"
echo "NodeName=daei1 Name=gpu File=$T/dev/gpu[0-7]" >"$T/gres.conf"
export SLURM_CONF=$T/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N daei1
for _ in $(seq 120); do [[ $(sinfo -h -o %t 2>/dev/null) == idle ]] && break; sleep 0.5; done
[[ $(sinfo -h -o %t) == idle ]] || { sinfo; scontrol show node daei1; echo "FAIL: the node did not come up"; exit 1; }
say "$(sinfo --version), $(munged --version 2>&1 | awk '{print $1}'), $(mpirun --version | sed -n 1p)"
say "cluster up: node daei1 idle (ports $port_ctld/$port_d, $T)"

# --- jobs --------------------------------------------------------------------------------------------------------
STEPS=${STEPS:-150}
common=(--set run.root="$T/runs" --set train.synthetic_rows=4096 --set train.synthetic_dim=32 --set dae.hidden=64
        --set dae.depth=2 --set stage1.batch_size=64 --set stage1.warmup_steps=5 --set stage1.eval_every=0
        --set train.log_every=5 --set train.ckpt_every=100000)
submit() {  # NAME [sbatch options...] -- daei args...
  local name=$1; shift
  local opts=()
  while [[ $1 != -- ]]; do opts+=("$1"); shift; done
  shift
  (cd "$SRC" && sbatch --parsable --job-name="$name" --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 \
     --output="$T/$name.out" --export=ALL,DAEI="$D" "${opts[@]}" launch/slurm/daei.sbatch \
     train --stage 1 "${common[@]}" --set run.name="$name" "$@")
}
state() { scontrol show job "$1" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
field() { scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | sed -n 1p; }
wait_for() {  # SECONDS WHAT COMMAND...: poll COMMAND every 0.5 s
  local limit=$1 what=$2; shift 2
  local t=$SECONDS
  until "$@"; do
    if ((SECONDS - t > limit)); then say "FAIL: no $what within $limit s"; return 1; fi
    sleep 0.5
  done
}
is_state() { [[ $(state "$1") == "$2" ]]; }
has_metrics() { [[ -s $T/runs/$1/stage1/metrics.jsonl ]]; }
log_has() { grep -q -- "$2" "$T/$1.out" 2>/dev/null; }
show_fail() { for f in "$@"; do echo "--- $f"; cat "$f"; done; }
requeued_now() {  # JOB: a requeued job waits ~2 min (Slurm's BeginTime); start it at once
  wait_for 150 "requeue of job $1" is_state "$1" PENDING
  # slurmd revokes the old run's credential as the job is requeued; starting it again before that is settled kills
  # the job for good ("Job credential revoked", seen once in CI when the restart came 0.4 s after the requeue)
  sleep 5
  scontrol update JobId="$1" StartTime=now
}

ref=$(submit ref --time=10 -- --set stage1.steps="$STEPS")
tl=$(submit tl --time=10 --signal=B:USR1@5 -- --set stage1.steps=1000000)
pre=$(submit pre --time=10 -- --set stage1.steps="$STEPS")
say "submitted ref=$ref (uninterrupted), pre=$pre (scancel USR1), tl=$tl (limit cut mid-run, USR1@5)"

# pre: signal the batch shell once training is under way.
wait_for 120 "metrics from job $pre" has_metrics pre || { show_fail "$T/pre.out"; exit 1; }
scancel --signal=USR1 --batch "$pre"
say "pre: scancel --signal=USR1 --batch $pre"
requeued_now "$pre" || { show_fail "$T/pre.out"; exit 1; }
say "pre: requeued (Restarts=$(field "$pre" Restarts)), started again"

# tl: once it trains, its limit is cut to end 40-100 s from now. slurmctld checks limits every 30 s and sends the
# warning when less than 5 + 30 s are left, so it lands mid-run. (Not from submission: a warning in the first
# seconds reaches daei before its stop handler exists, which kills the rank; see the launch notes.)
wait_for 120 "metrics from job $tl" has_metrics tl || { show_fail "$T/tl.out"; exit 1; }
run=$(field "$tl" RunTime)
IFS=: read -r hh mm ss <<<"${run#*-}"
limit=$(((10#$hh * 3600 + 10#$mm * 60 + 10#$ss + 40 + 59) / 60))
scontrol update JobId="$tl" TimeLimit="$limit"
say "tl: running for $run; time limit cut to $limit min"
requeued_now "$tl" || { show_fail "$T/tl.out"; exit 1; }
say "tl: time-limit signal, requeued (Restarts=$(field "$tl" Restarts)), started again"
resumed() { grep -q "restart 1 on" "$T/$1.out" && grep -q "resumed from" "$T/$1.out"; }
wait_for 120 "the resumed run of job $tl" resumed tl || { show_fail "$T/tl.out"; exit 1; }
scancel "$tl"
say "tl: resumed from its checkpoint; cancelled"

for j in "$ref" "$pre"; do
  wait_for 240 "the end of job $j" is_state "$j" COMPLETED || { scontrol show job "$j"; show_fail "$T"/*.out; exit 1; }
done
say "ref and pre completed"

# --- checks ------------------------------------------------------------------------------------------------------
check() {  # NAME CONDITION-DESCRIPTION COMMAND...
  local name=$1 what=$2; shift 2
  "$@" || { show_fail "$T/$name.out"; echo "FAIL: $name: $what"; exit 1; }
}
check ref "exit 0, no requeue" grep -q "exit 0$" "$T/ref.out"
check ref "ran once" bash -c "! grep -q 'restart 1' '$T/ref.out' && ! grep -q requeueing '$T/ref.out'"
for n in pre tl; do
  check "$n" "exit 75 after USR1" grep -q "exit 75 (after USR1)" "$T/$n.out"
  check "$n" "requeue" grep -q "requeueing" "$T/$n.out"
  check "$n" "SLURM_RESTART_COUNT 1 in the log" grep -q "restart 1 on" "$T/$n.out"
  check "$n" "a DONE checkpoint" compgen -G "$T/runs/$n/stage1/ckpt-*/DONE" >/dev/null
done
check pre "exit 0 after the resume" grep -q "exit 0$" "$T/pre.out"
cmp "$T/runs/ref/stage1/final/dae/model.safetensors" "$T/runs/pre/stage1/final/dae/model.safetensors" ||
  { echo "FAIL: pre: final weights differ from ref's"; exit 1; }
say "pre: exit 75 -> requeue -> resumed -> final weights bitwise equal to the uninterrupted run"
grep -h "^\[launch\]" "$T/pre.out" "$T/tl.out" | grep -E "restart|USR1|exit|requeue" | sed 's/^/    /'

# --- srun ----------------------------------------------------------------------------------------------------------
if srun --mpi=list 2>&1 | grep -w pmix >/dev/null; then
  rc=0
  timeout 120 srun --mpi=pmix -N1 -n2 --time=5 "$D" train --stage 1 "${common[@]}" --set stage1.steps=20 \
    --set run.name=pmix >"$T/pmix.out" 2>&1 || rc=$?
  [[ $rc == 0 ]] || { show_fail "$T/pmix.out"; echo "FAIL: srun --mpi=pmix exit $rc"; exit 1; }
  grep -qE "2 ranks|world 2|world=2|2 processes" "$T/pmix.out" || { show_fail "$T/pmix.out"; echo "FAIL: srun --mpi=pmix: not a 2-rank world"; exit 1; }
  say "srun --mpi=pmix -n2: trained on 2 ranks"
else
  say "srun --mpi=list has no pmix: only the refusal is tested"
fi
rc=0
timeout 120 srun --mpi=none -N1 -n2 --time=5 "$D" train --stage 1 "${common[@]}" --set stage1.steps=20 \
  --set run.name=nopmi >"$T/nopmi.out" 2>&1 || rc=$?
[[ $rc != 0 && $rc != 124 ]] || { show_fail "$T/nopmi.out"; echo "FAIL: srun --mpi=none exit $rc, want a refusal"; exit 1; }
[[ ! -e $T/runs/nopmi/stage1/metrics.jsonl ]] || { show_fail "$T/nopmi.out"; echo "FAIL: srun --mpi=none trained"; exit 1; }
say "srun --mpi=none -n2: refused (exit $rc): $(grep -m1 -E "SLURM_NTASKS|PMI" "$T/nopmi.out" || true)"
say "OK"
