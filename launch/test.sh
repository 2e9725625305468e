#!/usr/bin/env bash
# The test command: set-up, configure, build (-j2), then every test under ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/setup.sh
bash launch/build.sh
cd build
ctest --output-on-failure -j1 "$@"
