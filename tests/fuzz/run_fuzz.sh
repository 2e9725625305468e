#!/usr/bin/env bash
# Builds the safetensors libFuzzer target with clang (Debian: clang + libclang-rt-14-dev, a manual step, not CI)
# and runs it. Usage: tests/fuzz/run_fuzz.sh [RUNS]   (default 1,000,000 executions)
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-1000000}
OUT=build/fuzz
mkdir -p "$OUT/corpus"
clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc \
  tests/fuzz/fuzz_safetensors.cpp src/core/safetensors_header.cpp src/core/error.cpp -lfmt -o "$OUT/fuzz_safetensors"
# Seeds: the committed model fixtures (valid files) and a few small hand-made headers.
cp -n tests/fixtures/models/*/io.safetensors "$OUT/corpus/" 2>/dev/null || true
for f in tests/fixtures/models/*/; do cp -n "$f/io.safetensors" "$OUT/corpus/$(basename "$f")-io.safetensors"; done
printf '\x02\x00\x00\x00\x00\x00\x00\x00{}' > "$OUT/corpus/empty.safetensors"
"$OUT/fuzz_safetensors" "$OUT/corpus" -dict=tests/fuzz/safetensors.dict -runs="$RUNS" -max_len=4096 \
  -print_final_stats=1 2>&1 | tail -30
