// libFuzzer target for the corpus JSON-lines readers (src/data/corpus*.cpp): the input as a user .jsonl source
// (read_user_file, field "text", each text normalised) and as a built split (for_each_corpus_row). Each must
// refuse with a daei::Error naming the file or deliver valid UTF-8 text. Build and run: tests/fuzz/run_fuzz.sh
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "data/corpus.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/dev/shm/daei-fuzz-corpus-" + std::to_string(::getpid()) + ".jsonl";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    daei::read_user_file(path, "text", 0, [](std::string t) {
      std::string out;
      if (daei::normalize_text(t, out) && !daei::valid_utf8(out)) __builtin_trap();
    });
  } catch (const daei::Error& e) {
    if (std::string(e.what()).find(path) == std::string::npos) __builtin_trap();
  }
  try {
    daei::for_each_corpus_row(path, [](int64_t, int64_t, std::string) {});
  } catch (const daei::Error& e) {
    if (std::string(e.what()).find(path) == std::string::npos) __builtin_trap();
  }
  return 0;
}
