# Sourced by tests/e2e/two_hosts_cut.sh and two_hosts_kill.sh (after tests/support/two_hosts.sh): a fault on one of
# the two nodes of a stage-2 job, then a resumed run on two other nodes.
#   th_fault cut    the link of emu2 (rank 1's node) goes down (ip link set down on its veth) mid-run
#   th_fault kill   every process of emu2 is SIGKILLed (slurmd, munged, slurmstepd, orted, the rank): a dead host
# Either way: the job ends within 60 s with a non-zero exit and one "[launch] error: lost node emu2" line, no rank or
# Open MPI daemon is left on emu1 or emu2, the run directory is intact (config, stage 1, metrics, complete
# checkpoints), and, the node back, the same job submitted again on emu3 + emu4 resumes from the newest checkpoint and
# ends with an inverter bitwise equal to an uninterrupted run's (2 ranks on this host).
# shellcheck shell=bash

us_now() { echo "${EPOCHREALTIME/./}"; }
secs() { printf '%d.%01d' $(($1 / 1000000)) $(($1 % 1000000 / 100000)); }   # MICROSECONDS as seconds

th_fault() {  # cut|kill
  local mode=$1
  th_start "two_hosts_$mode" 4
  # Stage 2 long enough to be cut in the middle: a checkpoint every 10 steps, the fault right after the first, some
  # 190 steps (10 s and more here) before the end.
  local a=(--config "$T/toy.yaml" --set run.root="$T/runs" "${TOY[@]}" --set stage2.steps="${STEPS:-200}"
           --set train.ckpt_every=10)
  prepare base stage1
  copy_run base ref
  copy_run base f
  local t=$SECONDS
  one_host "$T/ref.log" train --stage 2 "${a[@]}" --set run.name=ref
  say "reference: stage 2 uninterrupted, 2 ranks on this host, in $((SECONDS - t)) s"

  local job R=$T/runs/f
  job=$(submit f daei.sbatch --no-requeue --nodelist=emu1,emu2 --export=ALL,DAEI="$D",DAEI_NET_IF=emu0 -- \
        train --stage 2 "${a[@]}" --set run.name=f)
  # One rank on each node first (listing them takes a while), then the fault as soon as a checkpoint is complete.
  t=$SECONDS
  local before1="" before2=""
  until [[ $before1 == *daei* && $before2 == *daei* ]]; do
    job_ended "$job" && { cat "$T/f.out"; echo "FAIL: job $job ended before its ranks were seen"; exit 1; }
    ((SECONDS - t < 120)) || { cat "$T/f.out"; echo "FAIL: not one rank on each node within 120 s (emu1: $before1; emu2: $before2)"; exit 1; }
    sleep 0.2
    before1=$(ranks_on emu1 | tr '\n' ' ')
    before2=$(ranks_on emu2 | tr '\n' ' ')
  done
  until compgen -G "$R/stage2/ckpt-*/DONE" >/dev/null; do
    [[ -e $R/stage2/final ]] && { cat "$T/f.out"; echo "FAIL: stage 2 finished before a checkpoint was seen"; exit 1; }
    ((SECONDS - t < 120)) || { cat "$T/f.out"; echo "FAIL: no stage-2 checkpoint within 120 s"; exit 1; }
    sleep 0.05
  done
  cp "$R/config.yaml" "$T/config.before"
  local seen
  seen=$(compgen -G "$R/stage2/ckpt-*/DONE" | sed -n '$p')

  # Ended: the batch script has exited (state COMPLETING or final); Slurm releases the nodes once it hears from
  # both slurmds again or declares emu2 down (SlurmdTimeout, 30 s in the emulator).
  local t0 dt state code t_fault
  t0=$(us_now)
  t_fault=$(date +%s)
  if [[ $mode == cut ]]; then emu cut emu2 >/dev/null; else emu kill emu2 >/dev/null; fi
  until state=$(job_field "$job" JobState) && [[ $state != RUNNING ]]; do
    (($(us_now) - t0 < 60000000)) || { cat "$T/f.out"; echo "FAIL: the job still runs 60 s after the $mode (a hang)"; exit 1; }
    sleep 0.2
  done
  dt=$(($(us_now) - t0))
  code=$(job_field "$job" ExitCode)
  [[ $state != COMPLETED && $code != 0:0 ]] || { cat "$T/f.out"; echo "FAIL: job $job $state, exit $code after the $mode"; exit 1; }
  [[ ! -e $R/stage2/final ]] || { echo "FAIL: stage 2 finished before the $mode; raise STEPS"; exit 1; }
  say "job $job trained on emu1 ($before1) and emu2 ($before2); $mode emu2 once $(basename "$(dirname "$seen")") was complete"
  local lines
  lines=$(grep -c '^\[launch\] error: lost node emu2' "$T/f.out" || true)
  [[ $lines == 1 ]] || { cat "$T/f.out"; echo "FAIL: $lines '[launch] error: lost node emu2' lines in the log, want 1"; exit 1; }
  say "$mode emu2 -> job $job ended in $(secs "$dt") s: $state, exit $code"
  say "  $(grep '^\[launch\] error: lost node emu2' "$T/f.out")"
  # No rank and no orted left on either node (the far side's orted notices the lost mpirun through its own keepalive).
  local left
  t0=$(us_now)
  while :; do
    left=$(ranks_on emu1)$(ranks_on emu2)
    [[ -n $left ]] || break
    (($(us_now) - t0 < 30000000)) || { echo "FAIL: still running 30 s after the job ended: $left"; exit 1; }
    sleep 0.2
  done
  say "no rank or orted left on emu1 or emu2 ($(secs $(($(us_now) - t0))) s after the job's end)"

  # The node comes back: the link restored (cut; Slurm takes emu2 back when it next pings it, which can take
  # minutes, so the resumed run does not wait for it) or its daemons started again (kill: slurmd re-registers).
  if [[ $mode == cut ]]; then
    emu restore emu2 >/dev/null
  else
    emu start emu2 >/dev/null
    t0=$(us_now)
    until [[ $(emu exec emuctl sinfo -h -n emu2 -o %t) == idle ]]; do
      (($(us_now) - t0 < 60000000)) || { emu exec emuctl sinfo -N; echo "FAIL: emu2 not idle 60 s after its restart"; exit 1; }
      sleep 0.5
    done
    say "emu2 idle again $(secs $(($(us_now) - t0))) s after its daemons were started again"
  fi

  # The run directory is intact: config as before, stage 1 untouched, metrics whole lines of JSON, and the newest
  # complete checkpoint is what the next run resumes from (an incomplete one, without DONE, is only reported).
  cmp "$T/config.before" "$R/config.yaml" || { echo "FAIL: config.yaml changed"; exit 1; }
  diff -r "$T/runs/base/stage1" "$R/stage1" >/dev/null || { echo "FAIL: stage1/ changed"; exit 1; }
  python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' "$R/stage2/metrics.jsonl" ||
    { echo "FAIL: stage2/metrics.jsonl is not whole lines of JSON"; exit 1; }
  local ck newest="" partial=""
  for ck in "$R"/stage2/ckpt-*; do
    if [[ -f $ck/DONE ]]; then newest=$(basename "$ck"); else partial+=" $(basename "$ck")"; fi
  done
  [[ -n $newest ]] || { echo "FAIL: no complete checkpoint left"; exit 1; }
  say "run directory intact: newest complete checkpoint $newest${partial:+; incomplete (no DONE):$partial}"

  local job2
  t=$SECONDS
  job2=$(submit f2 daei.sbatch --no-requeue --nodelist=emu3,emu4 --export=ALL,DAEI="$D",DAEI_NET_IF=emu0 -- \
         train --stage 2 "${a[@]}" --set run.name=f --resume)
  wait_end "$job2" 120
  [[ $(job_field "$job2" JobState) == COMPLETED ]] || { cat "$T/f2.out"; echo "FAIL: the resumed job $job2 did not complete"; exit 1; }
  grep -E "resumed from .*stage2/$newest" "$T/f2.out" >/dev/null || { cat "$T/f2.out"; echo "FAIL: not resumed from $newest"; exit 1; }
  grep -E '\[dist\] .*world 2: 0:emu3\(local 0\), 1:emu4\(local 0\)' "$T/f2.out" >/dev/null ||
    { cat "$T/f2.out"; echo "FAIL: the resumed job did not run on emu3 and emu4"; exit 1; }
  # By now Slurm has ended the first job too (it waits for emu2's slurmd, or declares emu2 down).
  wait_end "$job" 60
  say "Slurm recorded job $job as $(job_field "$job" JobState) (exit $(job_field "$job" ExitCode))" \
      "$(($(date -d "$(job_field "$job" EndTime)" +%s) - t_fault)) s after the $mode"
  local m=stage2/final/inverter/model.safetensors
  cmp "$T/runs/ref/$m" "$R/$m" || { echo "FAIL: the resumed inverter differs from the uninterrupted run's"; exit 1; }
  say "resumed on emu3 + emu4 (job $job2, $((SECONDS - t)) s) from $newest: final inverter bitwise equal to the uninterrupted run"
}
