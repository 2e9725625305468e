# Sourced by tests/e2e/two_hosts*.sh (with BUILD, SRC and D set): an emulated Slurm cluster on this machine
# (launch/emulate_cluster.sh, one network + UTS + mount namespace a node, one bridge) and the toy run the tests train.
#   th_start NAME NODES        skip ("SKIP: reason", exit 0) unless the emulator can run here; make $T; bring up
#                              emuctl + NODES compute nodes in $T/emu; on exit tear them down and fail if a namespace
#                              or a process of the cluster is left
#   emu ARGS...                launch/emulate_cluster.sh ARGS... for this cluster
#   submit NAME SCRIPT [sbatch options...] -- ARGS...   sbatch launch/slurm/SCRIPT ARGS (2 nodes, 1 task each, log
#                              $T/NAME.out); prints the job id
#   wait_end JOB LIMIT         wait for the job to end (any final state); fails after LIMIT seconds
#   job_field JOB KEY          a field of `scontrol show job`
#   TOY                        the toy run's fixed settings (with --config $T/toy.yaml --set run.root=$T/runs)
#   prepare RUN [stage1]       corpus + train cache (one process) and, with "stage1", stage 1 (2 ranks on this host)
#                              in run RUN; copy_run FROM TO copies its corpus/, cache/ and stage1/ into run TO
#   ranks_on NODE              "pid comm" of the daei ranks and Open MPI daemons still on NODE
# shellcheck shell=bash
# shellcheck source=tests/support/toy_config.sh
source "$SRC/tests/support/toy_config.sh"

say() { printf '[%s %3ds] %s\n' "$TH_NAME" $((SECONDS - th_t0)) "$*"; }
emu() { bash "$SRC/launch/emulate_cluster.sh" "$@"; }
th_start_time() {  # PID: start time (to tell a process from a later one with its pid)
  local s f
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  s=${s##*) }
  read -r -a f <<<"$s"
  [[ ${f[0]} == Z ]] || echo "${f[19]}"   # a zombie (nobody reaps it here) has ended
}

th_start() {  # NAME NODES
  TH_NAME=$1
  th_t0=$SECONDS
  local why c
  why=$(bash "$SRC/launch/emulate_cluster.sh" check) || { echo "SKIP: $why"; exit 0; }
  for c in mpirun python3 cmp; do command -v "$c" >/dev/null || { echo "SKIP: $TH_NAME: $c is missing"; exit 0; }; done
  [[ -x $D ]] || { echo "FAIL: $D is not built"; exit 1; }
  T=$(mktemp -d "/tmp/daei-$TH_NAME.XXXXXX")
  chmod 755 "$T"
  export EMU_DIR=$T/emu EMU_NODES=$2
  trap th_cleanup EXIT
  emu up >"$T/up.log" 2>&1 || { cat "$T/up.log"; echo "FAIL: launch/emulate_cluster.sh up"; exit 1; }
  say "$(sed -n 's/^\[emulate_cluster\] [0-9:]* //p' "$T/up.log" | sed -n '$p')"
  say "$(emu exec emuctl sinfo --version), $(mpirun --version | sed -n 1p)"
  write_toy_config "$T"
}

th_cleanup() {
  local rc=$? id n p name start left="" ours=()
  set +e
  if ((rc != 0)); then
    for f in "$T"/*.out "$EMU_DIR"/nodes/*/slurmctld.log "$EMU_DIR"/nodes/emu*/slurmd.log; do
      [[ -f $f ]] && { echo "--- $f (end)"; tail -25 "$f"; }
    done
  fi
  id=$(sed -n 's/^ID=//p' "$EMU_DIR/cluster" 2>/dev/null)
  # every process inside the cluster's namespaces now, to check after `down` that none survived it
  for n in emuctl $(seq -f 'emu%g' 1 "$EMU_NODES"); do
    while read -r p name; do ours+=("$p:$(th_start_time "$p"):$name"); done < <(emu ps "$n" 2>/dev/null)
  done
  emu down || rc=1
  if [[ -n $id ]] && ip netns list | grep "daeiemu-$id-" >/dev/null; then
    echo "FAIL: namespaces left: $(ip netns list | grep "daeiemu-$id-" | tr '\n' ' ')"; rc=1
  fi
  if [[ -f $EMU_DIR/pids ]]; then
    while read -r n p name start; do ours+=("$p:$start:$name"); done <"$EMU_DIR/pids"
  fi
  for p in "${ours[@]}"; do
    IFS=: read -r n start name <<<"$p"
    [[ -n $start && $(th_start_time "$n") == "$start" ]] && left+=" $name($n)"
  done
  if [[ -n $left ]]; then echo "FAIL: processes of the cluster outlived its teardown:$left"; rc=1; fi
  ((rc == 0)) && say "torn down: no namespace, no process left"
  rm -rf "$T"
  exit "$rc"
}

submit() {  # NAME SCRIPT [sbatch options...] -- ARGS...
  local name=$1 script=$2
  shift 2
  local opts=()
  while [[ $1 != -- ]]; do opts+=("$1"); shift; done
  shift
  (cd "$SRC" && emu exec emuctl sbatch --parsable --job-name="$name" --output="$T/$name.out" --nodes=2 \
     --ntasks-per-node=1 --cpus-per-task=1 --gpus-per-task=1 --time=10 --export=ALL,DAEI="$D" "${opts[@]}" \
     "launch/slurm/$script" "$@")
}
job_field() { emu exec emuctl scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | sed -n 1p; }
job_ended() {
  case $(job_field "$1" JobState) in
    COMPLETED|FAILED|CANCELLED|NODE_FAIL|TIMEOUT|PREEMPTED|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE) return 0 ;;
  esac
  return 1
}
wait_end() {  # JOB LIMIT
  local t=$SECONDS
  until job_ended "$1"; do
    ((SECONDS - t < $2)) || { emu exec emuctl scontrol show job "$1"; echo "FAIL: job $1 still runs after $2 s"; return 1; }
    sleep 0.5
  done
}

# The toy run's fixed settings (what a resumed run must repeat): stage 1 and the stage-2 inverter tiny.
TOY=(--set reference.enabled=false --set reference.corrector=false --set cache.shard_rows=100
     --set stage1.steps=4 --set stage1.eval_every=0 --set stage2.eval_every=0 --set train.log_every=1)
one_host() {  # LOG ARGS...: launch/mpirun.sh 2 ARGS (2 ranks on this host)
  local log=$1
  shift
  env DAEI="$D" bash "$SRC/launch/mpirun.sh" 2 "$@" >"$log" 2>&1 || { tail -30 "$log"; echo "FAIL: launch/mpirun.sh 2 $*"; exit 1; }
}
prepare() {  # RUN [stage1]
  local run=$1 a=(--config "$T/toy.yaml" --set run.root="$T/runs" --set run.name="$1" "${TOY[@]}")
  "$D" corpus build "${a[@]}" >"$T/$run.corpus.log" 2>&1 || { tail -20 "$T/$run.corpus.log"; echo "FAIL: corpus build"; exit 1; }
  "$D" cache build --split train "${a[@]}" >"$T/$run.cache.log" 2>&1 ||
    { tail -20 "$T/$run.cache.log"; echo "FAIL: cache build"; exit 1; }
  if [[ ${2:-} == stage1 ]]; then
    one_host "$T/$run.stage1.log" train --stage 1 "${a[@]}"
  fi
}
copy_run() {  # FROM TO
  local d
  mkdir -p "$T/runs/$2"
  for d in corpus cache stage1; do
    [[ -d $T/runs/$1/$d ]] && cp -a "$T/runs/$1/$d" "$T/runs/$2/"
  done
  return 0
}
ranks_on() {  # NODE
  local p name
  while read -r p name; do
    [[ $name == daei || $name == orted ]] && echo "$p $name"
  done < <(emu ps "$1")
  return 0
}
