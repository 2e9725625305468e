// The cache manifest reader (cache/SPLIT/manifest.json), strict: every field a reader uses is checked for
// presence, type and range here, so a damaged or hand-edited manifest is one error naming the file and the field,
// never a JSON library exception or a path outside the cache folder. No torch, no HDF5 (fuzzed by
// tests/fuzz/fuzz_manifest.cpp).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace daei {

constexpr int kCacheSchema = 1;  // the version of the cache files (manifest and shards) this daei writes and reads

// Parses and checks manifest text; path names the file in errors. Returns the JSON (fields as cache.h describes).
nlohmann::json parse_cache_manifest(const std::string& text, const std::string& path);

}  // namespace daei
