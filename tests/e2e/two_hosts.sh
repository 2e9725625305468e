#!/usr/bin/env bash
# Two hosts equal one host (issue 33): the toy run's stage 1 and stage 2 on 2 ranks, one on each of two emulated
# nodes (launch/emulate_cluster.sh: own network stack, address and host name each) under a two-node Slurm cluster
# (`sbatch -N2 launch/slurm/daei.sbatch`, mpirun's ranks talking TCP across the bridge), give final models bitwise
# equal to 2 ranks on this host, and the log names both hosts. Stage 1 runs without DAEI_NET_IF (the script guesses
# the interface and says so), stage 2 with DAEI_NET_IF=emu0. Needs root; skipped otherwise.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
D=$BUILD/daei
# shellcheck source=tests/support/two_hosts.sh
source "$SRC/tests/support/two_hosts.sh"
th_start two_hosts 2
STAGE2=(--set stage2.steps=6 --set train.ckpt_every=100)

prepare base
copy_run base one
copy_run base two
a=(--config "$T/toy.yaml" --set run.root="$T/runs" "${TOY[@]}" "${STAGE2[@]}")
t=$SECONDS
one_host "$T/one.stage1.log" train --stage 1 "${a[@]}" --set run.name=one
one_host "$T/one.stage2.log" train --stage 2 "${a[@]}" --set run.name=one
say "one host, 2 ranks: stage 1 + stage 2 in $((SECONDS - t)) s"

t=$SECONDS
j1=$(submit two1 daei.sbatch -- train --stage 1 "${a[@]}" --set run.name=two)
wait_end "$j1" 120
j2=$(submit two2 daei.sbatch --export=ALL,DAEI="$D",DAEI_NET_IF=emu0 -- train --stage 2 "${a[@]}" --set run.name=two)
wait_end "$j2" 120
say "two hosts (jobs $j1, $j2): stage 1 + stage 2 in $((SECONDS - t)) s"
for j in "$j1:two1" "$j2:two2"; do
  [[ $(job_field "${j%%:*}" JobState) == COMPLETED ]] ||
    { cat "$T/${j#*:}.out"; echo "FAIL: job ${j%%:*} ended $(job_field "${j%%:*}" JobState)"; exit 1; }
done

fail() { cat "$T/$1.out"; echo "FAIL: $2"; exit 1; }
grep -E '\[dist\] .*world 2: 0:emu1\(local 0\), 1:emu2\(local 0\)' "$T/two1.out" >/dev/null ||
  fail two1 "the log does not name both hosts ([dist] ... world 2: 0:emu1(...), 1:emu2(...))"
grep -F '[launch] DAEI_NET_IF is not set: guessed interface emu0 (routes to emu2, 10.77.0.12)' "$T/two1.out" >/dev/null ||
  fail two1 "no logged guess of the interface"
grep -F -- '--mca btl_tcp_if_include emu0 --mca oob_tcp_if_include emu0' "$T/two2.out" >/dev/null ||
  fail two2 "DAEI_NET_IF=emu0 did not reach mpirun"
say "$(grep -h -o '\[dist\] .*world 2: .*' "$T/two1.out" | sed -n 1p)"
n=0
for f in stage1/final/dae/model.safetensors stage2/final/inverter/model.safetensors; do
  [[ -s $T/runs/one/$f ]] || { ls -R "$T/runs/one/stage2"; echo "FAIL: no $f"; exit 1; }
  cmp "$T/runs/one/$f" "$T/runs/two/$f" || { echo "FAIL: $f differs between one host and two hosts"; exit 1; }
  n=$((n + 1))
done
say "final models bitwise equal ($n files: stage1 dae, stage2 inverter)"
say "OK"
