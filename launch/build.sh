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
# CI builds with -Werror (warnings are on everywhere); a developer's build warns only.
if [[ ${CI:-} == true ]]; then args+=(-DDAEI_WERROR=ON); else args+=(-DDAEI_WERROR=OFF); fi
cmake -S . -B build "${args[@]}" >build.configure.log 2>&1 || { cat build.configure.log; exit 1; }
cmake --build build -j"${DAEI_BUILD_JOBS:-2}" "$@"  # e.g. --target daei
