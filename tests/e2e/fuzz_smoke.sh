#!/usr/bin/env bash
# CI's fuzz smoke: builds every libFuzzer target (tests/fuzz/run_fuzz.sh, clang, into BUILD/fuzz, objects reused
# between runs) and runs each for 30 s from its committed seeds (tests/fuzz/corpus/TARGET), two at a time. Any
# crash, sanitizer report, timeout or OOM fails, printing the input's path and hex. Skips only without clang (and in
# CI fails then: launch/setup.sh installs clang and libclang-rt-14-dev).
set -euo pipefail
BUILD=${1:-build}
SRC=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=$(cd "$BUILD" && pwd)
cd "$SRC"
rt=$(clang++ -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null || true)
if ! command -v clang++ >/dev/null || [[ ! -f $rt ]]; then
  msg="clang++ or its libFuzzer runtime is missing (Debian clang, libclang-rt-14-dev; bash launch/setup.sh installs them)"
  if [[ ${CI:-} == true ]]; then echo "FAIL: $msg"; exit 1; fi
  echo "SKIP: $msg"; exit 0
fi
t0=$SECONDS
FUZZ_JOBS=2 FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-20} bash tests/fuzz/run_fuzz.sh -s -t "${FUZZ_SMOKE_SECONDS:-30}" -o "$BUILD/fuzz"
echo "fuzz smoke: every target clean, $((SECONDS - t0)) s in all"
