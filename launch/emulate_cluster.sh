#!/usr/bin/env bash
# An emulated Slurm cluster on this one machine, for testing multi-node runs (tests/e2e/two_hosts*.sh):
#   launch/emulate_cluster.sh check              can it run here? (one line; exit 1 with the reason if not)
#   launch/emulate_cluster.sh up                 create the nodes and start munged, slurmctld and the slurmds
#   launch/emulate_cluster.sh exec NODE CMD...   run CMD on NODE (e.g. `exec emuctl sbatch ...`, `exec emu1 hostname`)
#   launch/emulate_cluster.sh cut|restore NODE   take NODE's link down / up again (its veth on the bridge)
#   launch/emulate_cluster.sh kill NODE          SIGKILL every process of NODE (a crashed host); `start NODE` restarts
#                                                its munged and slurmd
#   launch/emulate_cluster.sh ps NODE            the processes of NODE, one "pid comm" a line (its holder left out)
#   launch/emulate_cluster.sh status | down      what is up / remove everything `up` made
# Env: EMU_DIR (state, config and logs; default /tmp/daei-emu), EMU_NODES (compute nodes; default 2), EMU_IF
# (the interface name inside every node; default emu0), EMU_NET (the first three octets of the nodes' /24;
# default 10.77.0).
#
# Every node is a network namespace (its own stack, address and interface EMU_IF, a veth whose other end is on a
# bridge of its own that has no address, so no traffic leaves the namespaces this script creates), a UTS namespace
# (its own host name) and a mount namespace in which $EMU_DIR/local is that node's own folder
# $EMU_DIR/nodes/NODE (munge socket, slurmd spool, pid and log files, TmpFS): the rest of the file system is shared,
# as a cluster's shared file system is. A `sleep` per node holds the namespaces; everything else is started inside
# them with nsenter. The controller is a node of its own, emuctl (EMU_NET.2), so that cutting a compute node's link
# cuts it from the controller and from the other nodes alike; the compute nodes are emu1..emuN (EMU_NET.11 on). Each
# node runs its own munged (one key), emuctl runs slurmctld and every compute node a slurmd; ports are Slurm's
# defaults, private to each namespace. Slurm clients must run inside a node: `exec emuctl squeue`.
#
# Which processes are ours: those inside our network namespaces (every one of them was started by this script, or by
# a daemon it started: job steps, mpirun, ranks); `down` and `kill` touch only those, found by the namespace's inode,
# and the holders and daemons are also listed by pid in $EMU_DIR/pids. `down` also runs when `up` fails half-way.
# Needs root (namespaces, a bridge, root daemons) and the Debian packages iproute2, util-linux, munge, slurmctld,
# slurmd and slurm-client.
set -euo pipefail
me=launch/emulate_cluster.sh
# shellcheck source=launch/slurm/slurm_conf.sh
source "$(dirname "${BASH_SOURCE[0]}")/slurm/slurm_conf.sh"
usage="usage: $me check|up|down|status | exec NODE CMD... | cut|restore|kill|start|ps NODE"
EMU_DIR=${EMU_DIR:-/tmp/daei-emu}
EMU_NODES=${EMU_NODES:-2}
EMU_IF=${EMU_IF:-emu0}
EMU_NET=${EMU_NET:-10.77.0}
LOCAL=$EMU_DIR/local
CTL=emuctl
NEED=(ip nsenter unshare setsid munged slurmctld slurmd sbatch sinfo scontrol srun)

say() { echo "[emulate_cluster] $(date +%T) $*"; }
die() { echo "$me: $*" >&2; exit 1; }

# check: why this cannot run here, in one line (empty: it can)
why_not() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "$me needs root (it creates network namespaces and a bridge and runs munged, slurmctld and slurmd)"; return
  fi
  local c
  for c in "${NEED[@]}"; do
    command -v "$c" >/dev/null ||
      { echo "$me: $c is missing (Debian packages iproute2, util-linux, munge, slurmctld, slurmd, slurm-client)"; return; }
  done
  unshare --net --uts --mount true 2>/dev/null ||
    { echo "$me: cannot create network/UTS/mount namespaces here (a container without CAP_SYS_ADMIN?)"; return; }
  # a bridge and a veth pair, tried in a namespace of their own that vanishes with the command
  unshare --net ip link add daeiprobe type bridge 2>/dev/null &&
    unshare --net ip link add daeiprobe0 type veth peer name daeiprobe1 2>/dev/null ||
    echo "$me: cannot create a bridge or a veth pair here (kernel modules bridge, veth?)"
}

# --- state ---------------------------------------------------------------------------------------------------------
# $EMU_DIR/cluster: ID, BR, NODES (all, emuctl first); $EMU_DIR/nodes/NODE/{netns,veth,holder} as each is made.
load() {
  [[ -f $EMU_DIR/cluster ]] || return 1
  local k v
  while IFS='=' read -r k v; do
    case $k in ID) ID=$v ;; BR) BR=$v ;; NODES) read -r -a NODES <<<"$v" ;; esac
  done <"$EMU_DIR/cluster"
}
node_file() { cat "$EMU_DIR/nodes/$1/$2" 2>/dev/null || true; }
known() {  # NODE
  local n
  for n in "${NODES[@]}"; do [[ $n == "$1" ]] && return 0; done
  return 1
}
holder_of() {  # NODE: the pid holding its namespaces, if it is still that process
  local h start
  read -r h start <<<"$(node_file "$1" holder)"
  [[ -n ${h:-} && $(proc_start "$h") == "$start" ]] || return 1
  echo "$h"
}
proc_start() {  # PID: its start time (field 22 of /proc/PID/stat), to tell a pid from a later reuse
  local s f
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  s=${s##*) }
  read -r -a f <<<"$s"
  [[ ${f[0]} == Z ]] || echo "${f[19]}"   # a zombie (nobody reaps it here) has ended
}
netns_ino() {  # NODE: the inode of its network namespace, while it exists
  local ns
  ns=$(node_file "$1" netns)
  [[ -n $ns && -e /run/netns/$ns ]] || return 1
  stat -L -c %i "/run/netns/$ns"
}
node_pids() {  # NODE [all]: the pids inside its network namespace (without its holder unless "all")
  local ino h="" line p
  ino=$(netns_ino "$1") || return 0
  [[ ${2:-} == all ]] || h=$(holder_of "$1" || true)
  # one stat for all processes: the inode of each one's network namespace
  while read -r line; do
    [[ $line == "$ino "* ]] || continue
    p=${line#* /proc/}
    p=${p%%/*}
    [[ $p == "$h" ]] || echo "$p"
  done < <(stat -L -c '%i %n' /proc/[0-9]*/ns/net 2>/dev/null || true)
}
in_node() {  # NODE CMD...: run CMD in NODE's namespaces, in this directory
  local node=$1 h
  shift
  h=$(holder_of "$node") || die "node $node is not up (no holder process); $me status"
  nsenter --target "$h" --net --uts --mount --wd="$PWD" -- "$@"
}
start_daemon() {  # NODE NAME CMD...: CMD detached inside NODE, its pid recorded
  local node=$1 name=$2 h pid
  shift 2
  h=$(holder_of "$node") || die "node $node is not up"
  setsid nsenter --target "$h" --net --uts --mount --wd=/ -- "$@" </dev/null >>"$EMU_DIR/nodes/$node/$name.out" 2>&1 &
  pid=$!
  disown "$pid"
  echo "$node $pid $name $(proc_start "$pid")" >>"$EMU_DIR/pids"
}
wait_until() {  # SECONDS WHAT CMD...: poll CMD every 0.2 s until it succeeds or the deadline passes
  local limit=$1 what=$2 t0=$SECONDS
  shift 2
  until "$@"; do
    ((SECONDS - t0 < limit)) || { echo "$me: no $what within $limit s" >&2; return 1; }
    sleep 0.2
  done
}

# --- up ------------------------------------------------------------------------------------------------------------
make_node() {  # NODE ADDRESS INDEX
  local node=$1 addr=$2 i=$3 d=$EMU_DIR/nodes/$1 ns=daeiemu-$ID-$1 veth=de$ID$3
  mkdir -p "$d/spool" "$d/tmp"
  ip netns add "$ns"
  echo "$ns" >"$d/netns"
  ip link add "$veth" type veth peer name "$EMU_IF" netns "$ns"
  echo "$veth" >"$d/veth"
  ip link set "$veth" master "$BR"
  ip link set "$veth" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$addr/24" dev "$EMU_IF"
  ip -n "$ns" link set "$EMU_IF" up
  # The holder: a sleep in the network namespace with its own host name and mount namespace, $LOCAL bound to $d.
  # shellcheck disable=SC2016  # expanded by the holder's shell
  setsid nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private bash -c \
    'hostname "$1" && mount --bind "$2" "$3" && touch "$3/.held" && exec sleep infinity' holder "$node" "$d" "$LOCAL" \
    </dev/null >"$d/holder.out" 2>&1 &
  local h=$!
  disown "$h"
  echo "$h $(proc_start "$h")" >"$d/holder"
  echo "$node $h holder $(proc_start "$h")" >>"$EMU_DIR/pids"
  wait_until 10 "namespace holder of $node" test -e "$d/.held" || { cat "$d/holder.out" >&2; return 1; }
  echo "$addr" >"$d/addr"
}
# SlurmdTimeout 30: Slurm declares a silent node down well after mpirun's keepalive (DAEI_KEEPALIVE, 16 s) has ended
# the job, as on a real cluster (300 s there), so a test sees the job's own account of a lost node, not NODE_FAIL.
write_conf() {
  local n i
  head -c 1024 /dev/urandom >"$EMU_DIR/munge.key"
  chmod 400 "$EMU_DIR/munge.key"
  mkdir -p "$EMU_DIR/state" "$EMU_DIR/dev"
  for i in 0 1; do ln -sf /dev/null "$EMU_DIR/dev/gpu$i"; done
  {
    echo "# written by $me up"
    echo "ClusterName=daeiemu$ID"
    echo "SlurmctldHost=$CTL($EMU_NET.2)"
    slurm_conf "AuthInfo=socket=$LOCAL/munge.sock" "StateSaveLocation=$EMU_DIR/state" "SlurmdSpoolDir=$LOCAL/spool" \
      "TmpFS=$LOCAL/tmp" "SlurmctldPidFile=$LOCAL/slurmctld.pid" "SlurmdPidFile=$LOCAL/slurmd.pid" \
      "SlurmctldLogFile=$LOCAL/slurmctld.log" "SlurmdLogFile=$LOCAL/slurmd.log" \
      "SlurmdTimeout=30" "MessageTimeout=5" "TCPTimeout=2" "KillWait=5"
    i=11
    for n in "${NODES[@]:1}"; do
      echo "NodeName=$n NodeHostname=$n NodeAddr=$EMU_NET.$i CPUs=4 Gres=gpu:2 State=UNKNOWN"
      i=$((i + 1))
    done
    echo "PartitionName=emu Nodes=emu[1-$EMU_NODES] Default=YES MaxTime=INFINITE State=UP"
  } >"$EMU_DIR/slurm.conf"
  echo "NodeName=emu[1-$EMU_NODES] Name=gpu File=$EMU_DIR/dev/gpu[0-1]" >"$EMU_DIR/gres.conf"
}
start_munge() {  # NODE
  rm -f "$EMU_DIR/nodes/$1/munge.sock"
  start_daemon "$1" munged munged --foreground --force --key-file="$EMU_DIR/munge.key" --socket="$LOCAL/munge.sock" \
    --pid-file="$LOCAL/munged.pid" --log-file="$LOCAL/munged.log" --seed-file="$LOCAL/munged.seed"
  wait_until 10 "munged on $1" test -S "$EMU_DIR/nodes/$1/munge.sock"
}
start_slurmd() { start_daemon "$1" slurmd slurmd -D -f "$EMU_DIR/slurm.conf" -N "$1"; }
node_state() {  # NODE: its Slurm state (idle, alloc, down*, ...), from the controller
  in_node "$CTL" env SLURM_CONF="$EMU_DIR/slurm.conf" sinfo -h -n "$1" -o %t 2>/dev/null || true
}
all_idle() {
  local n
  for n in "${NODES[@]:1}"; do [[ $(node_state "$n") == idle ]] || return 1; done
}
# shellcheck disable=SC2317  # reached through the trap in up
up_failed() {  # EXIT STATUS
  (($1)) || return 0
  say "up failed (exit $1): tearing down"
  down || true
  exit "$1"
}
up() {
  local why i
  why=$(why_not)
  [[ -z $why ]] || { echo "$why" >&2; exit 1; }
  [[ $EMU_NODES =~ ^[1-9][0-9]?$ ]] || die "EMU_NODES must be 1..99, got '$EMU_NODES'"
  [[ ${#EMU_IF} -le 15 && $EMU_IF =~ ^[A-Za-z][A-Za-z0-9_]*$ ]] || die "EMU_IF must be an interface name, got '$EMU_IF'"
  [[ $EMU_NET =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "EMU_NET must be three octets (e.g. 10.77.0), got '$EMU_NET'"
  if [[ -f $EMU_DIR/cluster ]]; then die "a cluster is up in $EMU_DIR already ($me down first, or set EMU_DIR)"; fi
  mkdir -p "$EMU_DIR/nodes" "$LOCAL"
  chmod 755 "$EMU_DIR"
  local t0=$SECONDS
  trap 'up_failed $?' EXIT
  ID=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
  BR=de${ID}br
  NODES=("$CTL")
  for ((i = 1; i <= EMU_NODES; i++)); do NODES+=("emu$i"); done
  printf 'ID=%s\nBR=%s\nNODES=%s\n' "$ID" "$BR" "${NODES[*]}" >"$EMU_DIR/cluster"
  : >"$EMU_DIR/pids"
  ip link add "$BR" type bridge
  ip link set "$BR" up
  make_node "$CTL" "$EMU_NET.2" 0
  for ((i = 1; i <= EMU_NODES; i++)); do make_node "emu$i" "$EMU_NET.$((10 + i))" "$i"; done
  write_conf
  for i in "${NODES[@]}"; do start_munge "$i"; done
  start_daemon "$CTL" slurmctld slurmctld -D -f "$EMU_DIR/slurm.conf"
  for i in "${NODES[@]:1}"; do start_slurmd "$i"; done
  wait_until 60 "idle state of every node" all_idle || { status >&2; return 1; }
  trap - EXIT
  say "up in $((SECONDS - t0)) s: $CTL ($EMU_NET.2, slurmctld) and ${NODES[*]:1} on bridge $BR, interface $EMU_IF" \
      "in every node; run Slurm commands with: $me exec $CTL sinfo (SLURM_CONF=$EMU_DIR/slurm.conf)"
}

# --- down ----------------------------------------------------------------------------------------------------------
end_node() {  # NODE: TERM, then KILL after 5 s, every process in it (its holder last)
  local node=$1 p left=() h
  mapfile -t left < <(node_pids "$node")
  ((${#left[@]})) && kill -TERM "${left[@]}" 2>/dev/null
  local t0=$SECONDS
  while :; do
    mapfile -t left < <(node_pids "$node")
    ((${#left[@]})) || break
    if ((SECONDS - t0 >= 5)); then
      say "$node: SIGKILL to ${#left[@]} processes that outlived TERM by 5 s:" \
          "$(for p in "${left[@]}"; do printf '%s(%s) ' "$p" "$(cat "/proc/$p/comm" 2>/dev/null)"; done)"
      kill -KILL "${left[@]}" 2>/dev/null
      sleep 0.2
      break
    fi
    sleep 0.2
  done
  if h=$(holder_of "$node"); then kill -KILL "$h" 2>/dev/null || true; fi
  for p in $(node_pids "$node" all); do kill -KILL "$p" 2>/dev/null || true; done
}
down() {
  set +e
  if ! load; then say "nothing to take down in $EMU_DIR"; return 0; fi
  local n ns veth left t0
  # The controller first: no job is started again while the nodes go.
  for n in "${NODES[@]}"; do end_node "$n"; done
  for n in "${NODES[@]}"; do
    veth=$(node_file "$n" veth)
    [[ -n $veth ]] && ip link show "$veth" >/dev/null 2>&1 && ip link del "$veth"
    ns=$(node_file "$n" netns)
    [[ -n $ns && -e /run/netns/$ns ]] || continue
    t0=$SECONDS
    # a mount namespace that has just ended can keep the netns file busy for a moment
    until ip netns del "$ns" 2>/dev/null; do
      ((SECONDS - t0 < 10)) || { say "error: could not delete netns $ns"; break; }
      sleep 0.2
    done
  done
  ip link show "$BR" >/dev/null 2>&1 && ip link del "$BR"
  left=""
  for n in "${NODES[@]}"; do
    ns=$(node_file "$n" netns)
    [[ -n $ns && -e /run/netns/$ns ]] && left+=" netns $ns"
  done
  ip link show "$BR" >/dev/null 2>&1 && left+=" bridge $BR"
  set -e
  if [[ -n $left ]]; then say "error: left behind:$left"; return 1; fi
  rm -f "$EMU_DIR/cluster"
  say "down: ${NODES[*]} removed (logs kept in $EMU_DIR/nodes)"
}

status() {
  load || { echo "no cluster in $EMU_DIR"; return 1; }
  local n h
  for n in "${NODES[@]}"; do
    h=$(holder_of "$n" || echo none)
    echo "$n: address $(node_file "$n" addr), netns $(node_file "$n" netns), veth $(node_file "$n" veth)" \
         "($(cat "/sys/class/net/$(node_file "$n" veth)/operstate" 2>/dev/null || echo gone)), holder $h," \
         "$(node_pids "$n" | wc -l) processes"
  done
  in_node "$CTL" env SLURM_CONF="$EMU_DIR/slurm.conf" sinfo -N -o '%N %t %E' 2>&1 || true
}

cmd=${1:-}
(($#)) && shift
case $cmd in
  check) why=$(why_not); if [[ -n $why ]]; then echo "$why"; exit 1; fi; echo "$me: can run here" ;;
  up) up ;;
  down) [[ $(id -u) -eq 0 ]] || { why_not >&2; exit 1; }; down ;;
  status) status ;;
  exec|cut|restore|kill|start|ps)
    load || die "no cluster in $EMU_DIR ($me up first)"
    node=${1:?$usage}
    shift
    known "$node" || die "no node $node (nodes: ${NODES[*]})"
    case $cmd in
      exec)
        (($#)) || die "$usage"
        export SLURM_CONF=${SLURM_CONF:-$EMU_DIR/slurm.conf}
        in_node "$node" "$@" ;;
      cut) ip link set "$(node_file "$node" veth)" down; say "$node: link cut" ;;
      restore) ip link set "$(node_file "$node" veth)" up; say "$node: link restored" ;;
      kill)
        mapfile -t pids < <(node_pids "$node")
        ((${#pids[@]} == 0)) || kill -KILL "${pids[@]}" 2>/dev/null || true
        say "$node: SIGKILL to ${#pids[@]} processes" ;;
      start)
        [[ -n $(node_pids "$node") ]] && die "$node still runs processes; $me ps $node"
        start_munge "$node"
        if [[ $node == "$CTL" ]]; then start_daemon "$CTL" slurmctld slurmctld -D -f "$EMU_DIR/slurm.conf"
        else start_slurmd "$node"; fi
        say "$node: munged and slurm daemon started" ;;
      ps) for p in $(node_pids "$node"); do echo "$p $(cat "/proc/$p/comm" 2>/dev/null)"; done ;;
    esac ;;
  *) die "$usage" ;;
esac
