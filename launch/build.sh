#!/usr/bin/env bash
# Configure and build into build/. CI proves the NCCL part compiles: where nccl.h exists it is required.
set -euo pipefail
cd "$(dirname "$0")/.."
args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
[[ -f /usr/local/cuda/include/nccl.h ]] && args+=(-DDAEI_REQUIRE_NCCL=ON)
cmake -S . -B build "${args[@]}" >build.configure.log 2>&1 || { cat build.configure.log; exit 1; }
cmake --build build -j"${DAEI_BUILD_JOBS:-2}"
