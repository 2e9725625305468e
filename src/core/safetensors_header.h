// safetensors header parsing and validation, free of libtorch so that a fuzzer can drive it alone.
// Format: 8-byte little-endian header length N, N bytes of JSON, then the data area. Each tensor entry is
// {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]} with offsets relative to the data area;
// the optional "__metadata__" entry maps strings to strings.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace daei {

// Headers larger than this are refused (the largest real headers are a few MB).
constexpr uint64_t kSafetensorsMaxHeader = 100ull << 20;

struct SafetensorsEntry {
  std::string name;
  std::string dtype;             // "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;   // byte range inside the data area
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // sorted by begin offset
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;                // file offset of the data area (8 + N)
};

// Size in bytes of one element of a safetensors dtype; 0 for an unknown dtype.
size_t safetensors_dtype_size(const std::string& dtype);

// Validates everything that can be checked without reading tensor bytes; throws one daei::Error naming
// `file` (and the tensor, when one is at fault). Never reads outside [data, data + size).
SafetensorsHeader parse_safetensors_header(const uint8_t* data, size_t size, const std::string& file);

}  // namespace daei
