// libFuzzer target for the cache manifest reader (src/data/cache_manifest.cpp): any text must be refused with a
// daei::Error naming the file, or be a manifest whose shards are file names inside the folder covering rows
// [0, rows) contiguously. Build and run: tests/fuzz/run_fuzz.sh
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "data/cache_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto m = daei::parse_cache_manifest(text, "fuzz/manifest.json");
    int64_t next = 0;
    for (const auto& s : m.at("shards")) {
      const std::string f = s.at("file").get<std::string>();
      if (f.find('/') != std::string::npos || f == ".." || f.empty()) __builtin_trap();
      if (s.at("row_begin").get<int64_t>() != next) __builtin_trap();
      next = s.at("row_end").get<int64_t>();
    }
    if (next != m.at("rows").get<int64_t>()) __builtin_trap();
  } catch (const daei::Error& e) {
    if (std::string(e.what()).find("fuzz/manifest.json") == std::string::npos) __builtin_trap();
  }
  return 0;
}
