#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (Debian: clang + libclang-rt-14-dev, a manual step, not CI) and runs
# each for RUNS executions. Usage: tests/fuzz/run_fuzz.sh [RUNS] [TARGET ...]   (default 1,000,000; all targets)
#   safetensors       src/core/safetensors_header.cpp   (header validator)
#   config            src/core/config.cpp               (YAML config loader, --set, value rules)
#   embedding_request src/model/embedding_request.cpp   (serve-embedder's request body parser)
#   manifest          src/data/cache_manifest.cpp       (cache manifest reader)
#   corpus_jsonl      src/data/corpus*.cpp              (user .jsonl sources and built splits)
# Run it at low priority on a shared machine: nice -n 19 tests/fuzz/run_fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-1000000}
shift || true
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(safetensors config embedding_request manifest corpus_jsonl)
OUT=build/fuzz
mkdir -p "$OUT/gen"
# The compiled-in config defaults, as CMake generates them (configs/defaults/*.yaml in order, each + "\n").
{
  printf 'R"daei_defaults('
  for f in $(ls configs/defaults/*.yaml | LC_ALL=C sort); do cat "$f"; printf '\n'; done
  printf ')daei_defaults"\n'
} >"$OUT/gen/defaults_yaml.inc"
CXX=(clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc
     -I"$OUT/gen" -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB -DFMT_SHARED)
build() {
  local name=$1; shift
  "${CXX[@]}" "tests/fuzz/fuzz_$name.cpp" "$@" -o "$OUT/fuzz_$name"
}
run() {
  local name=$1; shift
  mkdir -p "$OUT/corpus_$name"
  echo "== fuzz_$name: $RUNS runs"
  "$OUT/fuzz_$name" "$OUT/corpus_$name" -runs="$RUNS" -print_final_stats=1 -artifact_prefix="$OUT/" "$@" 2>&1 |
    grep -E "^(stat::|==|SUMMARY|Done|INFO: Seed)|ERROR|deadly|crash" | tail -12
}
for t in "${TARGETS[@]}"; do
  case $t in
    safetensors)
      build safetensors src/core/safetensors_header.cpp src/core/error.cpp -lfmt
      cp -n tests/fixtures/models/*/io.safetensors "$OUT/corpus_safetensors/" 2>/dev/null || mkdir -p "$OUT/corpus_safetensors"
      for f in tests/fixtures/models/*/; do cp -n "$f/io.safetensors" "$OUT/corpus_safetensors/$(basename "$f")-io.safetensors"; done
      printf '\x02\x00\x00\x00\x00\x00\x00\x00{}' >"$OUT/corpus_safetensors/empty.safetensors"
      run safetensors -dict=tests/fuzz/safetensors.dict -max_len=4096 ;;
    config)
      build config src/core/config.cpp src/core/error.cpp src/core/fsutil.cpp -lyaml-cpp -lfmt
      mkdir -p "$OUT/corpus_config"
      cp configs/quickstart.yaml "$OUT/corpus_config/quickstart.yaml"
      printf 'stage1:\n  batch_size: 0\n  lr: 1.0e-3\nrun: {name: x, seed: 3}\n' >"$OUT/corpus_config/s1"
      printf '=embedder.sigma=[0.01, 0.02]' >"$OUT/corpus_config/s2"
      printf '# x\na:\n  b: 1  # range: [0, inf)\n  c: x # one of: a|b\n' >"$OUT/corpus_config/s3"
      run config -dict=tests/fuzz/config.dict -max_len=2048 ;;
    embedding_request)
      build embedding_request src/model/embedding_request.cpp -lfmt
      mkdir -p "$OUT/corpus_embedding_request"
      printf '{"model": "m", "input": ["a b", "c"]}' >"$OUT/corpus_embedding_request/s1"
      printf '{"input": "x\\u00e9"}' >"$OUT/corpus_embedding_request/s2"
      run embedding_request -max_len=1024 ;;
    manifest)
      build manifest src/data/cache_manifest.cpp src/core/error.cpp -lfmt
      mkdir -p "$OUT/corpus_manifest"
      cat >"$OUT/corpus_manifest/s1" <<'JSON'
{"schema": 1, "kind": "noisy", "split": "val", "rows": 3, "dim": 4, "dtype": "float16", "embedder": "glove",
 "sigma": 0.04, "noise_seed": 7, "corpus_sha256": "ab", "shard_rows": 2, "offline_eval_only": false,
 "shards": [{"file": "shard-00000.h5", "rows": 2, "row_begin": 0, "row_end": 2, "content_sha256": "c"},
            {"file": "shard-00001.h5", "rows": 1, "row_begin": 2, "row_end": 3, "content_sha256": "d"}]}
JSON
      run manifest -max_len=2048 ;;
    corpus_jsonl)
      build corpus_jsonl src/data/corpus.cpp src/data/corpus_sources.cpp src/core/config.cpp src/core/error.cpp \
        src/core/fsutil.cpp src/core/log.cpp -lyaml-cpp -lspdlog -lfmt
      mkdir -p "$OUT/corpus_corpus_jsonl"
      printf '{"id": 0, "text": "The cat sat.", "source": "x"}\n{"id": 1, "text": "A  dog\\tran"}\n' \
        >"$OUT/corpus_corpus_jsonl/s1"
      run corpus_jsonl -max_len=1024 ;;
    *) echo "unknown target $t"; exit 2 ;;
  esac
done
