// What HttpEmbedder makes of one HTTP answer of an OpenAI-style /v1/embeddings service: a status to retry, an
// error, or the embeddings. Kept apart from the transport and from libtorch, so tests/fuzz/fuzz_http_answer.cpp
// fuzzes it: the service is remote, so its bytes are untrusted.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace daei {

struct EmbeddingsAnswer {
  std::string retry;          // non-empty (e.g. "HTTP 503"): a transient failure, try again
  int64_t dim = 0;            // the vectors' length
  std::vector<float> values;  // n x dim, row i = the embedding of text i
};

// `status` and `body` of the answer to n texts (n >= 1); `dim` is the length expected (0: unknown, the first
// vector's); `url` names the service in errors; `has_key`: an API key was sent. Throws daei::Error when the answer is
// refused (401/403, another non-200 status, a body that is not the embeddings of the n texts).
EmbeddingsAnswer read_embeddings_answer(int status, const std::string& body, size_t n, int64_t dim,
                                        const std::string& url, bool has_key);

}  // namespace daei
