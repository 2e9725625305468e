// The body of POST /v1/embeddings, parsed without trusting it (serve-embedder; fuzzed by
// tests/fuzz/fuzz_embedding_request.cpp). No torch, no HTTP: just JSON → texts or a 400 message.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace daei {

// {"input": "text" | ["text", ...], "model": "..."?}. Fills texts and returns "" when valid, else the message of a
// 400 answer ("body is not valid JSON", "\"input\" has 300 texts, the limit is 256", ...).
std::string parse_embedding_request(const std::string& body, int64_t max_batch, std::vector<std::string>& texts);

}  // namespace daei
