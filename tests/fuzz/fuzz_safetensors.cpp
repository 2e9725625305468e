// libFuzzer target for the safetensors header validator (src/core/safetensors_header.cpp). Any input must either
// be refused with a daei::Error or yield entries whose byte ranges lie inside the input; every accepted range is
// read end to end so AddressSanitizer catches a range that escapes the buffer. Build and run: tests/fuzz/run_fuzz.sh
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exactly-sized heap buffer so that a read one byte past the end is an ASan error.
  std::vector<uint8_t> buf(data, data + size);
  const uint8_t* p = buf.empty() ? nullptr : buf.data();
  try {
    auto h = daei::parse_safetensors_header(p, buf.size(), "fuzz.safetensors");
    volatile uint8_t sink = 0;
    uint64_t prev_end = 0;
    for (const auto& e : h.entries) {
      if (e.end < e.begin || h.data_start + e.end > buf.size()) __builtin_trap();
      if (e.end > e.begin) {
        if (e.begin < prev_end) __builtin_trap();  // overlap slipped through
        prev_end = e.end;
      }
      for (uint64_t i = e.begin; i < e.end; ++i) sink = sink + p[h.data_start + i];
    }
    (void)sink;
  } catch (const daei::Error&) {
  }
  return 0;
}
