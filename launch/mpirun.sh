#!/usr/bin/env bash
# A daei subcommand on NP ranks of this machine (one GPU per rank where there are GPUs: daei maps its node-local
# MPI rank to a device itself):
#   launch/mpirun.sh NP SUBCOMMAND [args...]          e.g.  launch/mpirun.sh 2 train --config C --stage 1 --resume
#   launch/mpirun.sh --dry-run NP SUBCOMMAND [args...]      print the command, run nothing
# Env: DAEI (the binary; default build/daei of this checkout), THREADS (torch/BLAS threads per rank; default 1, the
# fastest here, DESIGN.md). Paths in the arguments are relative to where you run this, as for daei itself.
# Several hosts (inside a multi-node Slurm allocation, or with a hostfile of your own; README "Several hosts"):
# DAEI_NET_IF (an interface name or CIDR, comma-separated for several) is the network of the ranks' TCP traffic and of
# mpirun's control channel; unset inside a multi-node allocation, the interface that routes to another node is
# guessed, and the guess is logged. DAEI_KEEPALIVE="TIME INTVL PROBES" (seconds, seconds, count; default "10 2 3")
# makes mpirun notice a host that stopped answering within TIME + INTVL * PROBES seconds and end the job, where
# Open MPI's own default waits 8 minutes and more (a cut link): "0" leaves Open MPI's default.
#
# Stopping: USR1 or TERM to this script asks the ranks to checkpoint at the next step and exit 75 ("run again to
# resume"); both reach mpirun as USR1, which it forwards to the ranks. Sending TERM to mpirun itself would make it
# kill the ranks a few seconds later instead (open-mpi/ompi#12149). Ctrl-C (INT) ends the run without a checkpoint.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dry=0
if [[ ${1:-} == --dry-run ]]; then dry=1; shift; fi
usage="usage: launch/mpirun.sh [--dry-run] NP SUBCOMMAND [args...]"
np=${1:?$usage}; shift
[[ $np =~ ^[1-9][0-9]*$ ]] || { echo "launch/mpirun.sh: NP must be a positive integer, got '$np'; $usage" >&2; exit 2; }
(($#)) || { echo "launch/mpirun.sh: no SUBCOMMAND; $usage" >&2; exit 2; }
DAEI=${DAEI:-$here/build/daei}
THREADS=${THREADS:-1}

show() { local s; printf -v s '%q ' "$@"; echo "${s% }"; }   # a command line, quoted where needed
# The interface that routes to another node of this Slurm allocation (the address Slurm has for it), else that of
# the default route; nothing when neither is known.
guess_net_if() {
  local n addr dev
  for n in $(scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null); do
    [[ $n == "${SLURMD_NODENAME:-}" ]] && continue
    addr=$(scontrol show node "$n" 2>/dev/null | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p')
    addr=$(getent ahostsv4 "${addr:-$n}" 2>/dev/null | sed -n '1s/ .*//p')
    [[ -n $addr ]] || continue
    dev=$(ip -o route get "$addr" 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p')
    [[ -n $dev && $dev != lo ]] && { echo "$dev (routes to $n, $addr)"; return 0; }
  done
  dev=$(ip -o route show default 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p' | sed -n 1p)
  [[ -n $dev ]] && echo "$dev (the default route's)"
  return 0
}
net_args=()   # Open MPI's transport across hosts (README "Several hosts")
net_if=${DAEI_NET_IF:-}
if [[ -z $net_if && ${SLURM_JOB_NUM_NODES:-1} -gt 1 ]]; then
  guess=$(guess_net_if)
  if [[ -n $guess ]]; then
    net_if=${guess%% *}
    echo "[launch] DAEI_NET_IF is not set: guessed interface $guess for ${SLURM_JOB_NUM_NODES} nodes" >&2
  else
    echo "[launch] DAEI_NET_IF is not set and no interface could be guessed: Open MPI picks (set DAEI_NET_IF)" >&2
  fi
fi
[[ -z $net_if ]] || net_args+=(--mca btl_tcp_if_include "$net_if" --mca oob_tcp_if_include "$net_if")
read -r ka_time ka_intvl ka_probes <<<"${DAEI_KEEPALIVE:-10 2 3}"
if [[ $ka_time != 0 ]]; then
  [[ $ka_time =~ ^[1-9][0-9]*$ && ${ka_intvl:-} =~ ^[1-9][0-9]*$ && ${ka_probes:-} =~ ^[1-9][0-9]*$ ]] ||
    { echo "launch/mpirun.sh: DAEI_KEEPALIVE must be \"TIME INTVL PROBES\" (positive integers) or 0, got '${DAEI_KEEPALIVE:-}'" >&2; exit 2; }
  net_args+=(--mca oob_tcp_keepalive_time "$ka_time" --mca oob_tcp_keepalive_intvl "$ka_intvl"
             --mca oob_tcp_keepalive_probes "$ka_probes")
fi
cmd=(mpirun --oversubscribe --bind-to none -np "$np"
     -x OMP_NUM_THREADS="$THREADS" -x OPENBLAS_NUM_THREADS="$THREADS" "${net_args[@]}")
[[ $(id -u) -eq 0 ]] && cmd+=(--allow-run-as-root)   # OpenMPI refuses root without it
cmd+=("$DAEI" "$@")

if ((dry)); then
  echo "[launch] would run: $(show "${cmd[@]}")"
  exit 0
fi
[[ -x $DAEI ]] || { echo "launch/mpirun.sh: $DAEI is not built (bash launch/build.sh), or set DAEI=path" >&2; exit 1; }

# mpirun runs in the background so that a trapped signal is handled at once (bash runs traps only between
# commands); `wait` returns early when a trap runs, so wait again until mpirun has really exited.
pid=""
stop=""
interrupted=0
# shellcheck disable=SC2317  # reached through the traps below
forward() {  # SIGNAL
  interrupted=1
  stop=$1
  echo "[launch] $(date +%T) $1: asking the ranks to checkpoint and stop (exit 75)" >&2
  if [[ -n $pid ]]; then kill -USR1 "$pid" 2>/dev/null || true; fi
}
trap 'forward USR1' USR1
trap 'forward TERM' TERM
trap 'interrupted=1; [[ -n $pid ]] && kill -INT "$pid" 2>/dev/null || true' INT
"${cmd[@]}" &
pid=$!
[[ -n $stop ]] && { kill -USR1 "$pid" 2>/dev/null || true; }   # a signal that came before mpirun existed
while :; do
  interrupted=0
  rc=0
  wait "$pid" || rc=$?
  ((interrupted)) || break
done
if ((rc == 75)); then
  echo "[launch] stopped after a checkpoint (exit 75): run the same command again to continue" \
       "(train: with --resume)" >&2
fi
exit "$rc"
