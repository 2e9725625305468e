// libFuzzer target for the embeddings `daei invert --input` reads (src/cli/embedding_parse.cpp): any bytes must be
// refused with a daei::Error naming the command and the file, or be an n x d matrix (n, d > 0) holding every value.
// Byte 0 picks the format (even: .npy, odd: JSON lines). Build: tests/fuzz/run_fuzz.sh
#include <sstream>

#include "cli/embedding_parse.h"
#include "fuzz_util.h"

using daei::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string bytes = daei::fuzz::rest(data, size);
  const bool npy = (data[0] & 1) == 0;
  const std::string path = npy ? "fuzz/in.npy" : "fuzz/in.jsonl";
  try {
    daei::cli::FloatMatrix m;
    if (npy) {
      m = daei::cli::parse_npy(bytes, path, "invert");
    } else {
      std::istringstream in(bytes);
      m = daei::cli::parse_embedding_lines(in, path, "invert");
    }
    require(m.rows > 0 && m.cols > 0 && m.values.size() == size_t(m.rows) * size_t(m.cols));
  } catch (const daei::Error& e) {
    daei::fuzz::require_names(e, path);
    daei::fuzz::require_names(e, "invert");
  }
  return 0;
}
