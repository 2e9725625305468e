# The libFuzzer targets (sourced by run_fuzz.sh): each is tests/fuzz/fuzz_NAME.cpp with the daei sources it tests,
# the libraries they link and the longest input worth trying.
FUZZ_TARGETS=(safetensors config embedding_request manifest corpus_jsonl http_answer embedding_input model_json
              stage_files)
declare -A FUZZ_SRCS FUZZ_LIBS FUZZ_MAXLEN
E=src/core/error.cpp
FUZZ_SRCS[safetensors]="src/core/safetensors_header.cpp $E";        FUZZ_LIBS[safetensors]="-lfmt"
FUZZ_SRCS[config]="src/core/config.cpp src/core/fsutil.cpp $E";     FUZZ_LIBS[config]="-lyaml-cpp -lfmt"
FUZZ_SRCS[embedding_request]="src/model/release/embedding_request.cpp";     FUZZ_LIBS[embedding_request]="-lfmt"
FUZZ_SRCS[manifest]="src/data/cache_manifest.cpp $E";               FUZZ_LIBS[manifest]="-lfmt"
FUZZ_SRCS[corpus_jsonl]="src/data/corpus.cpp src/data/corpus_sources.cpp src/core/config.cpp src/core/fsutil.cpp
  src/core/log.cpp $E";                                             FUZZ_LIBS[corpus_jsonl]="-lyaml-cpp -lspdlog -lfmt -lz"
FUZZ_SRCS[http_answer]="src/model/release/embeddings_answer.cpp $E";        FUZZ_LIBS[http_answer]="-lfmt"
FUZZ_SRCS[embedding_input]="src/cli/embedding_parse.cpp $E";        FUZZ_LIBS[embedding_input]="-lfmt"
FUZZ_SRCS[model_json]="src/model/net/t5_config.cpp src/model/net/bert_config.cpp src/model/release/sbert_json.cpp src/core/fsutil.cpp
  $E";                                                              FUZZ_LIBS[model_json]="-lfmt"
FUZZ_SRCS[stage_files]="src/stages/loop/stage_files.cpp src/data/run_layout.cpp src/core/fsutil.cpp src/core/sha256.cpp
  src/core/log.cpp $E";                                             FUZZ_LIBS[stage_files]="-lspdlog -lfmt"
for t in "${FUZZ_TARGETS[@]}"; do FUZZ_MAXLEN[$t]=2048; done
FUZZ_MAXLEN[safetensors]=4096
FUZZ_MAXLEN[embedding_request]=1024
FUZZ_MAXLEN[corpus_jsonl]=1024
