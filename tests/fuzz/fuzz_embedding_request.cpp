// libFuzzer target for serve-embedder's request parser (src/model/release/embedding_request.cpp): any body must give either
// an error message (the 400 answer) and no texts, or 1..max_batch texts. Build and run: tests/fuzz/run_fuzz.sh
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/release/embedding_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> texts;
  const std::string err = daei::parse_embedding_request(body, 8, texts);
  if (err.empty() && (texts.empty() || texts.size() > 8)) __builtin_trap();
  if (!err.empty() && !texts.empty()) __builtin_trap();
  return 0;
}
