#!/usr/bin/env bash
# Configure and build into build/ (every target, or those given: `launch/build.sh --target daei`). CI proves the NCCL part compiles: where nccl.h exists it is required.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache: paths relative to the checkout so a fresh clone (CI) reuses the cache of earlier builds on this machine;
# the sloppiness settings let it cache translation units that use the precompiled header.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
[[ -f /usr/local/cuda/include/nccl.h ]] && args+=(-DDAEI_REQUIRE_NCCL=ON)
# Warnings are on everywhere (-Wall -Wextra). In CI (CI=true) any warning fails the build, as -Werror would, but
# found in the build's output: the compile flags stay those of a developer's build, so ccache entries are shared
# (ccache replays a cached compile's warnings). -DDAEI_WERROR=ON is there for those who want the flag itself.
cmake -S . -B build "${args[@]}" >build.configure.log 2>&1 || { cat build.configure.log; exit 1; }
if [[ ${CI:-} != true ]]; then
  exec cmake --build build -j"${DAEI_BUILD_JOBS:-2}" "$@"  # e.g. --target daei
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cmake --build build -j"${DAEI_BUILD_JOBS:-2}" "$@" 2>&1 | tee "$log"
if grep -q "warning:" "$log"; then
  echo "build: warnings are errors in CI (CI=true):"
  grep "warning:" "$log" | sort -u
  exit 1
fi
