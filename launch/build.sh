#!/usr/bin/env bash
# Configure and build into build/ (every target, or those given: `launch/build.sh --target daei`). CI proves the NCCL part compiles: where nccl.h exists it is required.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache: paths relative to the checkout so a fresh clone (CI) reuses the cache of earlier builds on this machine;
# the sloppiness settings let it cache translation units that use the precompiled header.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
# libtorch: the torch wheel's (launch/wheels.lock), unpacked into the asset cache by launch/setup.sh, with its
# nvidia-* libraries (CUDA runtime, NCCL) beside it: the build a GPU user makes. `--debian-torch` builds instead
# against Debian's libtorch 1.13 (CPU; DAEI_DEBIAN_TORCH=1 launch/setup.sh installs it) into build-torch1.13/, for
# side-by-side comparisons (results/torch2.md).
BUILD_DIR=build
ASSETS="${DAEI_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/daei}"
TORCH_VERSION=$(awk '!/^#/ && $2 ~ /^torch==/ {sub("torch==", "", $2); print $2}' launch/wheels.lock)
TORCH_DIR="$ASSETS/torch-$TORCH_VERSION/torch/share/cmake/Torch"
if [[ ${1:-} == --debian-torch ]]; then
  shift
  BUILD_DIR=build-torch1.13
  TORCH_DIR=/usr/lib/x86_64-linux-gnu/cmake/Torch
fi
[[ -f "$TORCH_DIR/TorchConfig.cmake" ]] || { echo "build: no libtorch at $TORCH_DIR (run launch/setup.sh)" >&2; exit 1; }
# Its prefix first on CMAKE_PREFIX_PATH too: TorchConfig looks for Caffe2's config and for libtorch.so on the default
# paths before its own folder, and would take Debian's (1.13) where libtorch-dev is installed.
TORCH_PREFIX=$(cd "$TORCH_DIR/../../.." && pwd)
args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DTorch_DIR=$TORCH_DIR" "-DCMAKE_PREFIX_PATH=$TORCH_PREFIX")
# CI proves the NCCL communicator compiles and links: with the wheel's NCCL (or the toolkit's) it is required.
[[ -f "$TORCH_DIR/../../../../nvidia/nccl/include/nccl.h" || -f /usr/local/cuda/include/nccl.h ]] &&
  args+=(-DDAEI_REQUIRE_NCCL=ON)
# Warnings are on everywhere (-Wall -Wextra). In CI (CI=true) any warning fails the build, as -Werror would, but
# found in the build's output: the compile flags stay those of a developer's build, so ccache entries are shared
# (ccache replays a cached compile's warnings). -DDAEI_WERROR=ON is there for those who want the flag itself.
cmake -S . -B "$BUILD_DIR" "${args[@]}" >"$BUILD_DIR.configure.log" 2>&1 || { cat "$BUILD_DIR.configure.log"; exit 1; }
if [[ ${CI:-} != true ]]; then
  exec cmake --build "$BUILD_DIR" -j"${DAEI_BUILD_JOBS:-2}" "$@"  # e.g. --target daei
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cmake --build "$BUILD_DIR" -j"${DAEI_BUILD_JOBS:-2}" "$@" 2>&1 | tee "$log"
if grep -q "warning:" "$log"; then
  echo "build: warnings are errors in CI (CI=true):"
  grep "warning:" "$log" | sort -u
  exit 1
fi
