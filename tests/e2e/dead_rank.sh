#!/usr/bin/env bash
# A rank killed with SIGKILL in the middle of `mpirun -np 2 daei train --stage 1` ends the whole job within 60 s,
# with a non-zero exit and a message naming the dead rank, and leaves no rank behind: once for rank 1 (rank 0
# waits for it in an all-reduce) and once for rank 0 (the rank that writes checkpoints and metrics).
set -euo pipefail
BUILD=$1
D=$BUILD/daei
T=$(mktemp -d)
mp=""
cleanup() {  # only processes this test started, by pid
  if [[ -n $mp ]] && kill -0 "$mp" 2>/dev/null; then
    pkill -KILL -P "$mp" 2>/dev/null || true
    kill -KILL "$mp" 2>/dev/null || true
  fi
  rm -rf "$T"
}
trap cleanup EXIT
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
common=(--set run.root="$T" --set train.synthetic_rows=4096 --set train.synthetic_dim=32 --set dae.hidden=64
        --set dae.depth=2 --set stage1.batch_size=64 --set stage1.steps=1000000 --set stage1.warmup_steps=5
        --set stage1.eval_every=0 --set train.log_every=5 --set train.ckpt_every=20)

alive() { [[ -e /proc/$1 ]] && ! grep -q '^[^)]*) Z' "/proc/$1/stat" 2>/dev/null; }
rank_pid() {  # MPIRUN_PID RANK: the pid of that rank among mpirun's children
  local p
  for p in $(pgrep -P "$1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -x "OMPI_COMM_WORLD_RANK=$2" >/dev/null; then echo "$p"; return 0; fi
  done
  return 1
}

kill_one() {  # RANK
  local victim=$1 name=dead$1 log=$T/dead$1.log
  "${MPIRUN[@]}" -np 2 "$D" train --stage 1 "${common[@]}" --set run.name="$name" >"$log" 2>&1 &
  mp=$!
  # Training is under way once a checkpoint is complete (all ranks past set-up and a few all-reduces).
  for _ in $(seq 600); do
    compgen -G "$T/$name/stage1/ckpt-*/DONE" >/dev/null && break
    kill -0 "$mp" 2>/dev/null || { cat "$log"; echo "FAIL: the run ended before the kill"; exit 1; }
    sleep 0.2
  done
  compgen -G "$T/$name/stage1/ckpt-*/DONE" >/dev/null || { cat "$log"; echo "FAIL: no checkpoint after 120 s"; exit 1; }
  local pids=() r p
  for r in 0 1; do
    p=$(rank_pid "$mp" "$r") || { echo "FAIL: rank $r not found among mpirun's children"; exit 1; }
    pids+=("$p")
  done
  kill -KILL "${pids[$victim]}"
  local t0=${EPOCHREALTIME/./}   # microseconds
  while kill -0 "$mp" 2>/dev/null; do
    if ((${EPOCHREALTIME/./} - t0 > 60000000)); then
      cat "$log"; echo "FAIL: mpirun still runs 60 s after rank $victim was killed (a hang)"; exit 1
    fi
    sleep 0.1
  done
  local rc=0
  wait "$mp" || rc=$?
  mp=""
  local us=$((${EPOCHREALTIME/./} - t0))
  ((rc != 0)) || { cat "$log"; echo "FAIL: mpirun exited 0 after rank $victim was killed"; exit 1; }
  local msg
  msg=$(grep -m1 -E "rank $victim\b" "$log") || { cat "$log"; echo "FAIL: no message names rank $victim"; exit 1; }
  for p in "${pids[@]}"; do  # gone (or a zombie) within 5 s of mpirun's exit
    for _ in $(seq 50); do alive "$p" || break; sleep 0.1; done
    if alive "$p"; then echo "FAIL: rank process $p outlived mpirun by 5 s"; kill -KILL "$p"; exit 1; fi
  done
  printf 'dead_rank: kill -9 rank %d -> job ended in %d.%02d s, exit %d: %s\n' "$victim" $((us / 1000000)) \
    $((us % 1000000 / 10000)) "$rc" "$msg"
}

kill_one 1
kill_one 0
echo "dead_rank: OK"
