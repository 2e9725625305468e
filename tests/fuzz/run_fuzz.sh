#!/usr/bin/env bash
# Builds every libFuzzer target with clang (-fsanitize=fuzzer,address,undefined; Debian clang + libclang-rt-14-dev,
# installed by launch/setup.sh) and runs them. The builder of the targets (no CMake option: they need clang and
# their own sanitizer flags, the project builds with GCC); tests/e2e/fuzz_smoke.sh runs it in CI.
#   tests/fuzz/run_fuzz.sh [-r RUNS | -t SECONDS] [-b] [-s] [-o DIR] [TARGET ...]
#     -r RUNS      executions per target (default 1,000,000)      -t SECONDS  time per target instead
#     -b           build only                                      -o DIR      output folder (default build/fuzz)
#     -s           smoke: start from the committed seeds alone (tests/fuzz/corpus/TARGET), keep no corpus
#   FUZZ_JOBS=N    targets built / run at once (default 2)         FUZZ_TIMEOUT=S  seconds one input may take (10)
# Every target runs from $OUT/corpus_TARGET (grown, not committed) plus tests/fuzz/corpus/TARGET (seeds), with
# tests/fuzz/TARGET.dict where the format has keywords. A crash, sanitizer report, timeout or OOM exits 1 and prints
# the input's path and hex. Run it at low priority on a shared machine: nice -n 19 tests/fuzz/run_fuzz.sh -t 1200
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/fuzz/targets.sh
RUNS=1000000 SECONDS_EACH="" BUILD_ONLY=0 SMOKE=0 OUT=build/fuzz
[[ ${1:-} == --help || ${1:-} == -h ]] && { sed -n 5,9p "$0"; exit 0; }
if [[ ${1:-} =~ ^[0-9]+$ ]]; then RUNS=$1; shift; fi  # the former usage: run_fuzz.sh RUNS [TARGET ...]
while getopts "r:t:bso:" o; do
  case $o in
    r) RUNS=$OPTARG ;; t) SECONDS_EACH=$OPTARG ;; b) BUILD_ONLY=1 ;; s) SMOKE=1 ;; o) OUT=$OPTARG ;;
    *) sed -n 4,9p "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=("${FUZZ_TARGETS[@]}")
for t in "${TARGETS[@]}"; do [[ -n ${FUZZ_SRCS[$t]:-} ]] || { echo "unknown target $t (${FUZZ_TARGETS[*]})"; exit 2; }; done
JOBS=${FUZZ_JOBS:-2}
command -v clang++ >/dev/null || { echo "clang++ not found: install clang and libclang-rt-14-dev (launch/setup.sh)"; exit 3; }
# A smoke keeps its logs and findings apart, so that one run during a campaign in the same folder (CI beside a
# campaign) leaves the campaign's reports alone; the built targets are shared (a relink replaces the file).
LOGS="$OUT/logs" ART="$OUT/artifacts"
[[ $SMOKE == 1 ]] && LOGS="$OUT/smoke-logs" ART="$OUT/smoke-artifacts"
mkdir -p "$OUT/gen" "$OUT/obj" "$LOGS" "$ART"

# The compiled-in config defaults, as CMake generates them (configs/defaults/*.yaml in order, each + "\n").
{
  printf 'R"daei_defaults('
  for f in $(ls configs/defaults/*.yaml | LC_ALL=C sort); do cat "$f"; printf '\n'; done
  printf ')daei_defaults"\n'
} >"$OUT/gen/defaults_yaml.inc.new"
cmp -s "$OUT/gen/defaults_yaml.inc.new" "$OUT/gen/defaults_yaml.inc" || mv "$OUT/gen/defaults_yaml.inc.new" "$OUT/gen/defaults_yaml.inc"
rm -f "$OUT/gen/defaults_yaml.inc.new"

CXX=(clang++)
command -v ccache >/dev/null && CXX=(ccache clang++)  # objects are cached; links are not
FLAGS=(-std=c++17 -g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -Isrc
       -I"$OUT/gen" -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB -DFMT_SHARED -Wall -Wextra)
obj_of() { echo "$OUT/obj/${1//\//_}.o"; }
# Runs "$@" in the background, at most JOBS at once; `pool_wait` waits for all.
pool() {
  while (($(jobs -rp | wc -l) >= JOBS)); do wait -n || true; done
  "$@" &
}
pool_wait() { wait; }
# One object per source file, shared by the targets (same flags); -MMD so that a changed header recompiles it.
compile() {
  local src=$1 obj
  obj=$(obj_of "$1")
  if [[ -f $obj && -f $obj.d ]] &&
     ! find $(sed -e 's/^[^:]*://' -e 's/\\$//' "$obj.d") -newer "$obj" 2>/dev/null | grep -q .; then
    return 0
  fi
  "${CXX[@]}" "${FLAGS[@]}" -MMD -MF "$obj.d" -c "$src" -o "$obj" 2>"$obj.log" || touch "$obj.failed"
}
mapfile -t srcs < <(for t in "${TARGETS[@]}"; do printf '%s\n' "tests/fuzz/fuzz_$t.cpp" ${FUZZ_SRCS[$t]}; done | sort -u)
rm -f "$OUT"/obj/*.failed
for s in "${srcs[@]}"; do pool compile "$s"; done
pool_wait
for s in "${srcs[@]}"; do
  o=$(obj_of "$s"); [[ -s $o.log ]] && cat "$o.log"
  [[ -f $o.failed ]] && { echo "fuzz build: $s does not compile"; exit 1; }
done
for t in "${TARGETS[@]}"; do
  objs=()
  for s in "tests/fuzz/fuzz_$t.cpp" ${FUZZ_SRCS[$t]}; do objs+=("$(obj_of "$s")"); done
  clang++ -fsanitize=fuzzer,address,undefined "${objs[@]}" ${FUZZ_LIBS[$t]} -o "$OUT/fuzz_$t"
done
echo "fuzz build: ${TARGETS[*]} in $OUT"
[[ $BUILD_ONLY == 1 ]] && exit 0

# One target: its corpus (a fresh folder in a smoke), its dictionary, its budget; the report goes to
# $LOGS/TARGET.report (printed in order at the end); a finding prints its input in hex and fails.
run_one() {
  local t=$1 corpus="$OUT/corpus_$t" log="$LOGS/$t.log" art="$ART/$t-" rep="$LOGS/$t.report"
  [[ $SMOKE == 1 ]] && corpus=$(mktemp -d)
  mkdir -p "$corpus"
  local args=(-print_final_stats=1 -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -artifact_prefix="$art"
              -max_len="${FUZZ_MAXLEN[$t]}")
  [[ -f tests/fuzz/$t.dict ]] && args+=(-dict="tests/fuzz/$t.dict")
  if [[ -n $SECONDS_EACH ]]; then args+=(-max_total_time="$SECONDS_EACH"); else args+=(-runs="$RUNS"); fi
  rm -f "$art"*
  local rc=0 t0=$SECONDS
  local TIMEFORMAT="cpu %U s user + %S s sys, wall %R s"
  { time "$OUT/fuzz_$t" "${args[@]}" "$corpus" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?; } 2>"$log.time"
  [[ $SMOKE == 1 ]] && rm -rf "$corpus"
  {
    echo "== fuzz_$t: exit $rc after $((SECONDS - t0)) s; $(grep -E '^#[0-9]+' "$log" | tail -1)"
    echo "   $(cat "$log.time"); $(grep -E '^stat::(number_of_executed_units|peak_rss_mb)' "$log" | tr '\n' ' ')"
    if [[ $rc != 0 ]]; then
      grep -E "ERROR|SUMMARY|deadly|Test unit written" "$log" | head -8
      for f in "$art"*; do
        [[ -f $f ]] || continue
        echo "-- failing input $f ($(stat -c %s "$f") bytes):"
        od -A x -t x1z -v "$f" | head -32
      done
      echo "   full log: $log"
    fi
  } >"$rep"
  return "$rc"
}
for t in "${TARGETS[@]}"; do rm -f "$LOGS/$t.report"; pool run_one "$t"; done
pool_wait
fail=0
for t in "${TARGETS[@]}"; do
  cat "$LOGS/$t.report" 2>/dev/null || echo "== fuzz_$t: no report"
  grep -q "exit 0 after" "$LOGS/$t.report" 2>/dev/null || fail=1
done
exit $fail
