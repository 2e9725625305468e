#!/usr/bin/env bash
# Every launch, study and benchmark script (launch/*.sh, launch/slurm/*, studies/*/*.sh, tests/repeat/*.sh, bench/*.sh,
# bench/peers/*.sh) and the launch tests
# pass shellcheck at its default severity (style notes included); the other end-to-end scripts are held to errors only.
set -euo pipefail
SRC=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$SRC"
if ! command -v shellcheck >/dev/null; then
  msg="shellcheck is not installed (Debian package shellcheck; bash launch/setup.sh installs it)"
  if [[ ${CI:-} == true ]]; then echo "FAIL: $msg"; exit 1; fi
  echo "SKIP: $msg"; exit 0
fi
strict=(launch/*.sh launch/slurm/* studies/*/*.sh tests/repeat/*.sh bench/*.sh bench/peers/*.sh)
for t in shellcheck slurm_preempt mpirun_preempt dead_rank; do
  [[ -f tests/e2e/$t.sh ]] && strict+=("tests/e2e/$t.sh")
done
others=()
for f in tests/e2e/*.sh; do
  [[ " ${strict[*]} " == *" $f "* ]] || others+=("$f")
done
echo "shellcheck $(shellcheck --version | sed -n 's/^version: //p'): ${#strict[@]} scripts strictly, ${#others[@]} for errors"
rc=0
shellcheck -x "${strict[@]}" || rc=1
if ((${#others[@]})); then shellcheck -S error "${others[@]}" || rc=1; fi
# Under `set -o pipefail`, a reader that stops early (head, grep -q, grep -m, awk's exit) kills the writer's next
# write with SIGPIPE; the pipeline then fails (141) although it found what it wanted, which is how the quickstart
# exited 141 after a complete run. Readers in pipelines must read to the end (sed -n 1p, grep >/dev/null).
early=$(grep -nE '\|[[:space:]]*(head([[:space:]]|$)|grep[[:space:]]+-[[:alnum:]]*[qm]|awk[^|]*[;{[:space:]]exit)' \
  launch/*.sh launch/slurm/* studies/*/*.sh tests/repeat/*.sh tests/e2e/*.sh tests/support/*.sh bench/*.sh .ci/run \
  2>/dev/null || true)
if [[ -n $early ]]; then echo "$early"; echo "FAIL: a pipeline reader above stops early (SIGPIPE under pipefail)"; rc=1; fi
((rc == 0)) || { echo "FAIL: shellcheck findings above"; exit 1; }
echo "shellcheck: OK (${strict[*]})"
