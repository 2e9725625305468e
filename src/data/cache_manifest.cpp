#include "data/cache_manifest.h"

#include <cmath>

#include "core/error.h"

namespace daei {
using nlohmann::json;

nlohmann::json parse_cache_manifest(const std::string& text, const std::string& path) {
  json m;
  try {
    m = json::parse(text);
  } catch (const json::exception& e) {
    DAEI_FAIL("{}: not valid JSON ({}); run `daei cache build` again", path, e.what());
  }
  auto bad = [&](const std::string& field, const std::string& want) {
    DAEI_FAIL("{}: field \"{}\" {}: the manifest is damaged; delete it and run `daei cache build` again "
              "(complete shards are verified and kept)", path, field, want);
  };
  if (!m.is_object()) bad("(top level)", "must be an object");
  auto integer = [&](const json& o, const std::string& k, const std::string& name, int64_t lo) {
    if (!o.contains(k) || !o[k].is_number_integer()) bad(name, "is missing or not an integer");
    if (o[k].is_number_unsigned() && o[k].get<uint64_t>() > uint64_t(INT64_MAX)) bad(name, "is out of range");
    const int64_t v = o[k].get<int64_t>();
    if (v < lo) bad(name, fmt::format("is {}, below {}", v, lo));
    return v;
  };
  auto string = [&](const json& o, const std::string& k, const std::string& name) {
    if (!o.contains(k) || !o[k].is_string()) bad(name, "is missing or not a string");
    return o[k].get<std::string>();
  };
  integer(m, "schema", "schema", 1);
  const std::string kind = string(m, "kind", "kind");
  if (kind != "noisy" && kind != "clean") bad("kind", "must be noisy or clean");
  string(m, "split", "split");
  const int64_t rows = integer(m, "rows", "rows", 1);
  integer(m, "dim", "dim", 1);
  const std::string dtype = string(m, "dtype", "dtype");
  if (dtype != "float16" && dtype != "float32") bad("dtype", "must be float16 or float32");
  string(m, "embedder", "embedder");
  if (!m.contains("sigma") || !m["sigma"].is_number() || !std::isfinite(m["sigma"].get<double>()) ||
      m["sigma"].get<double>() < 0)
    bad("sigma", "is missing or not a finite number ≥ 0");
  if (!m.contains("noise_seed") || !m["noise_seed"].is_number_unsigned()) bad("noise_seed", "is missing or not ≥ 0");
  string(m, "corpus_sha256", "corpus_sha256");
  integer(m, "shard_rows", "shard_rows", 1);
  if (!m.contains("shards") || !m["shards"].is_array() || m["shards"].empty())
    bad("shards", "is missing or not a non-empty list");
  int64_t next = 0;
  size_t i = 0;
  for (const auto& s : m["shards"]) {
    const std::string at = fmt::format("shards[{}]", i++);
    if (!s.is_object()) bad(at, "must be an object");
    const std::string file = string(s, "file", at + ".file");
    if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos ||
        file.find('\0') != std::string::npos)
      bad(at + ".file", "must be a file name inside the cache folder");
    const int64_t b = integer(s, "row_begin", at + ".row_begin", 0);
    const int64_t e = integer(s, "row_end", at + ".row_end", 1);
    if (b != next || e <= b) bad(at, fmt::format("covers rows [{}, {}), expected to start at {}", b, e, next));
    if (s.contains("rows") && (!s["rows"].is_number_integer() || s["rows"].get<int64_t>() != e - b))
      bad(at + ".rows", "disagrees with row_begin / row_end");
    string(s, "content_sha256", at + ".content_sha256");
    next = e;
  }
  if (next != rows) bad("rows", fmt::format("is {} but the shards cover {}", rows, next));
  return m;
}

}  // namespace daei
