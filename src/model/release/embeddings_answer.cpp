#include "model/release/embeddings_answer.h"

#include <cmath>
#include <exception>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace daei {
using nlohmann::json;

namespace {
// A non-200, non-retried status: the service's own error.message when the body carries one.
[[noreturn]] void fail_status(int status, const std::string& body, const std::string& url, bool has_key) {
  if (status == 401 || status == 403)
    DAEI_FAIL("embedding service {} refused the request (HTTP {}): {}", url, status,
              !has_key ? "it needs an API key: set embedder.api_key_env to the name of an environment "
                         "variable holding it"
                       : "the API key from embedder.api_key_env was not accepted");
  std::string msg = body.substr(0, 300);
  try {
    msg = json::parse(body).at("error").at("message").get<std::string>();
  } catch (...) {
  }
  DAEI_FAIL("embedding service {} answered HTTP {}: {}", url, status, msg);
}
}  // namespace

EmbeddingsAnswer read_embeddings_answer(int status, const std::string& body, size_t n, int64_t dim,
                                        const std::string& url, bool has_key) {
  EmbeddingsAnswer out;
  if (status == 429 || status >= 500) {
    out.retry = "HTTP " + std::to_string(status);
    return out;
  }
  if (status != 200) fail_status(status, body, url, has_key);
  json j;
  try {
    j = json::parse(body);
  } catch (const std::exception& e) {
    DAEI_FAIL("embedding service {} sent a body that is not JSON: {}", url, e.what());
  }
  DAEI_CHECK(j.is_object() && j.contains("data") && j["data"].is_array(), "embedding service {} sent no \"data\" array",
             url);
  const auto& data = j["data"];
  DAEI_CHECK(data.size() == n, "embedding service {} returned {} embeddings for {} texts", url, data.size(), n);
  std::vector<bool> seen(n, false);
  for (size_t r = 0; r < data.size(); ++r) {
    const auto& item = data[r];
    DAEI_CHECK(item.is_object() && item.contains("embedding") && item["embedding"].is_array(),
               "embedding service {}: data[{}] has no \"embedding\" array", url, r);
    // A non-integer index threw json's type_error past the daei::Error handlers (a probe of fuzz_http_answer).
    DAEI_CHECK(!item.contains("index") || item["index"].is_number_integer(),
               "embedding service {}: data[{}].index is not an integer", url, r);
    const int64_t idx = item.contains("index") ? item["index"].get<int64_t>() : int64_t(r);
    DAEI_CHECK(idx >= 0 && idx < int64_t(n), "embedding service {}: data[{}].index {} out of range", url, r, idx);
    const auto& e = item["embedding"];
    if (dim == 0) dim = int64_t(e.size());
    DAEI_CHECK(int64_t(e.size()) == dim, "embedding service {} returned a {}-d vector, expected {} (embedder.dim)",
               url, e.size(), dim);
    if (out.values.empty()) out.values.assign(n * size_t(dim), 0.0f);
    float* o = out.values.data() + idx * dim;
    for (int64_t k = 0; k < dim; ++k) {
      DAEI_CHECK(e[k].is_number(), "embedding service {}: data[{}].embedding[{}] is not a number", url, r, k);
      // Beyond float32's range the value became inf (an out-of-range conversion, undefined behaviour) and the
      // infinite embedding went on into the cache.
      const double v = e[k].get<double>();
      DAEI_CHECK(std::fabs(v) <= std::numeric_limits<float>::max(),
                 "embedding service {}: data[{}].embedding[{}] = {} is beyond float32's range", url, r, k, v);
      o[k] = static_cast<float>(v);
    }
    seen[idx] = true;
  }
  for (bool s : seen) DAEI_CHECK(s, "embedding service {}: an index is missing from data", url);
  out.dim = dim;
  return out;
}

}  // namespace daei
