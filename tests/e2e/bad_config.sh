#!/usr/bin/env bash
# Issue 14, "Config values": every bad value, key or path is refused with one error line (exit 2) naming the key or
# file, before anything is written; a refused command leaves config.yaml as it was; under mpirun the refusal is
# printed once; a model too large for memory is one line saying how many bytes it needed.
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$(cd "$1" && pwd); SRC=$(cd "$2" && pwd)
D=$BUILD/daei
T=$(mktemp -d /tmp/daei-e2e-badcfg.XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T"
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
syn=(--set run.root="$T/runs" --set run.name=r --set train.synthetic_rows=64 --set train.synthetic_dim=8
     --set dae.hidden=16 --set dae.depth=1 --set stage1.batch_size=8 --set stage1.steps=2 --set stage1.eval_every=0
     --set stage1.warmup_steps=1)
# expect RC PATTERN CMD...: exit code RC, exactly one "daei: error:" line on stderr that matches PATTERN.
expect() {
  local want=$1 pat=$2; shift 2
  set +e; "$@" >out.txt 2>err.txt; local rc=$?; set -e
  [[ $rc == "$want" ]] || { cat out.txt err.txt; fail "exit $rc, want $want: $*"; }
  local n; n=$(grep -c "daei: error:" err.txt || true)
  [[ $n == 1 ]] || { cat err.txt; fail "$n error lines, want 1: $*"; }
  grep -q -- "$pat" err.txt || { cat err.txt; fail "no '$pat' in the error: $*"; }
  if grep -q "Exception raised from\|frame #\|terminate called" err.txt; then cat err.txt; fail "stack trace: $*"; fi
}

echo "== bad values: exit 2, one line naming the key, nothing written"
for kv in stage1.batch_size=0 train.log_every=0 stage1.lr=-1 stage1.steps=-5 corpus.test_size=-5 log.level=loud \
          server.port=70000 train.threads=0 embedder.sigma=-0.1 dae.hidden=1000000000; do
  expect 2 "'${kv%%=*}'" "$D" train --stage 1 "${syn[@]}" --set "$kv"
  [[ ! -e $T/runs ]] || fail "$kv: the run directory was created"
done
expect 2 "out of range \[0, 65535\]" "$D" serve-embedder --set server.port=70000
expect 2 "must be one of trace" "$D" embed --text x --set log.level=loud
expect 2 "noise-seed must be a number >= 0, got -1" "$D" embed --text x --noise-seed -1

echo "== run.name is one path component"
for name in ../../x .. a/b ""; do
  expect 2 "'run.name'" "$D" train --stage 1 "${syn[@]}" --set "run.name=$name"
done
[[ ! -e $T/x && ! -e $T/runs ]] || fail "something was written for a bad run.name"

echo "== config files: a directory, a duplicate key, invalid YAML"
mkdir cfgdir
expect 2 "cfgdir: is a directory" "$D" train --stage 1 "${syn[@]}" --config cfgdir
printf 'stage1:\n  lr: 0.1\n  lr: 0.2\n' >dup.yaml
expect 2 "duplicate config key 'stage1.lr'" "$D" train --stage 1 "${syn[@]}" --config dup.yaml
printf 'stage1: [\n' >broken.yaml
expect 2 "broken.yaml: invalid YAML" "$D" train --stage 1 "${syn[@]}" --config broken.yaml
[[ ! -e $T/runs ]] || fail "a refused config file wrote the run directory"

echo "== a refused command does not rewrite config.yaml"
set +e; "$D" cache verify --split none "${syn[@]}" >/dev/null 2>&1; set -e  # exit 1 (no cache), saves config.yaml
[[ -f $T/runs/r/config.yaml ]] || fail "no config.yaml written by a valid command"
cp "$T/runs/r/config.yaml" saved.yaml
expect 2 "'embedder.sigma'" "$D" train --stage 1 "${syn[@]}" --set embedder.sigma=-0.1
expect 2 "--stage 7" "$D" train --stage 7 "${syn[@]}" --set stage1.lr=0.5
cmp saved.yaml "$T/runs/r/config.yaml" || fail "a refused command rewrote config.yaml"

echo "== under mpirun: one line, no MPI_ABORT banner"
expect 2 "'stage1.batch_size'" "${MPIRUN[@]}" -np 2 "$D" train --stage 1 "${syn[@]}" --set stage1.batch_size=0
if grep -q "MPI_ABORT" err.txt; then cat err.txt; fail "MPI_Abort banner for a config refusal"; fi
expect 2 "single-process command" "${MPIRUN[@]}" -np 2 "$D" embed --text x

echo "== a model too large for memory: one line with the bytes"
expect 1 "bytes" "$D" train --stage 1 "${syn[@]}" --set dae.hidden=65536 --set dae.depth=1 --set run.name=big
echo "ok"
