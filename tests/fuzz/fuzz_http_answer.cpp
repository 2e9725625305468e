// libFuzzer target for what the HTTP embedder client makes of a service's answer (src/model/release/embeddings_answer.cpp):
// any status and body must give a retry (429, 5xx), a daei::Error naming the service, or n vectors of the expected
// length, all finite. Byte 0 picks the status, n texts and the expected dimension. Build: tests/fuzz/run_fuzz.sh
#include <cmath>

#include "fuzz_util.h"
#include "model/release/embeddings_answer.h"

using daei::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const int kStatus[8] = {200, 200, 200, 200, 400, 401, 429, 503};
  const int status = kStatus[data[0] & 7];
  const size_t n = 1 + ((data[0] >> 3) & 3);
  const int64_t dim = (data[0] >> 5) & 3;  // 0: unknown, taken from the answer
  const std::string url = "http://fuzz.invalid:1";
  try {
    auto a = daei::read_embeddings_answer(status, daei::fuzz::rest(data, size), n, dim, url, data[0] & 1);
    if (!a.retry.empty()) {
      require(status == 429 || status >= 500);
      return 0;
    }
    require(status == 200 && (dim == 0 || a.dim == dim) && a.values.size() == n * size_t(a.dim));
    for (float v : a.values) require(std::isfinite(v));
  } catch (const daei::Error& e) {
    daei::fuzz::require_names(e, url);
  }
  return 0;
}
