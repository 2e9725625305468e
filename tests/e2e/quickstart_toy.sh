#!/usr/bin/env bash
# The README's main command itself, on the toy config: `CONFIG=toy.yaml launch/quickstart.sh` installs (a no-op
# here), builds the program, runs the pipeline on 2 ranks and prints results.md; it must exit 0 and print the table.
# Its output goes through a pipe that closes early, as a pager or `| head` would: the script's own lines are tested,
# not only the pipeline (issue 32: it exited 141 from a SIGPIPE after a complete run).
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$(cd "$1" && pwd); SRC=$(cd "$2" && pwd)
[[ $BUILD == "$SRC/build" ]] || { echo "SKIP: launch/quickstart.sh builds into $SRC/build, this ctest runs in $BUILD"; exit 0; }
e2e_tmp
# shellcheck source=tests/support/toy_config.sh
source "$SRC/tests/support/toy_config.sh"
write_toy_config "$T"
set +e
CONFIG="$T/toy.yaml" NP=2 bash "$SRC/launch/quickstart.sh" >"$T/out.txt" 2>"$T/err.txt"
rc=$?
set -e
[[ $rc == 0 ]] || { tail -30 "$T/out.txt" "$T/err.txt"; fail "launch/quickstart.sh exited $rc"; }
# The table it printed is the run's results.md, whole, at the end of its output.
table=$T/toy/eval/results.md
[[ -s $table ]] || fail "no $table"
n=$(wc -l <"$table")
tail -n "$n" "$T/out.txt" | cmp -s - "$table" || { tail -5 "$T/out.txt"; fail "the output does not end with results.md"; }
grep -E '^\| *daei *\|' "$table" >/dev/null || fail "no daei row in the printed table"
# Issue 46: the floors and the shape columns in every table.
for row in 'floor-constant (floor)' 'floor-retrieval (floor)'; do
  grep -F "| $row |" "$table" >/dev/null || fail "no '$row' row in the printed table"
done
grep -F '| distinct | top template | loops ≤ 8 | artefacts |' "$table" >/dev/null || fail "no shape columns"
grep -F 'Above the floors' "$table" >/dev/null || fail "no floor verdicts"
# A second run resumes (every step complete) and prints the same table.
CONFIG="$T/toy.yaml" NP=2 bash "$SRC/launch/quickstart.sh" >"$T/out2.txt" 2>&1 || fail "second run exited $?"
tail -n "$n" "$T/out2.txt" | cmp -s - "$table" || fail "second run: the table differs"
echo "ok: quickstart.sh exit 0, table printed ($n lines), re-run resumes"
