#include "core/safetensors_header.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace daei {

size_t safetensors_dtype_size(const std::string& d) {
  if (d == "F64" || d == "I64") return 8;
  if (d == "F32" || d == "I32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL") return 1;
  return 0;
}

namespace {

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t entry_offset(const nlohmann::json& j, const std::string& file, const std::string& name) {
  DAEI_CHECK(j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0),
             "{}: tensor '{}': data_offsets must be non-negative integers", file, name);
  return j.get<uint64_t>();
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const uint8_t* data, size_t size, const std::string& file) {
  DAEI_CHECK(size >= 8, "{}: not a safetensors file: {} bytes, shorter than the 8-byte header length", file, size);
  const uint64_t n = read_u64_le(data);
  DAEI_CHECK(n <= kSafetensorsMaxHeader, "{}: safetensors header length {} exceeds the {} byte cap", file, n,
             kSafetensorsMaxHeader);
  DAEI_CHECK(n <= size - 8, "{}: safetensors header length {} runs past the end of the file ({} bytes)", file, n,
             size);
  DAEI_CHECK(n >= 2, "{}: safetensors header length {} is too short for a JSON object", file, n);
  const char* hb = reinterpret_cast<const char*>(data + 8);
  nlohmann::json h = nlohmann::json::parse(hb, hb + n, nullptr, /*allow_exceptions=*/false);
  DAEI_CHECK(!h.is_discarded(), "{}: safetensors header is not valid JSON", file);
  DAEI_CHECK(h.is_object(), "{}: safetensors header is not a JSON object", file);

  SafetensorsHeader out;
  out.data_start = 8 + n;
  const uint64_t data_len = size - out.data_start;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      DAEI_CHECK(v.is_object(), "{}: __metadata__ must be an object of strings", file);
      for (auto m = v.begin(); m != v.end(); ++m) {
        DAEI_CHECK(m.value().is_string(), "{}: __metadata__ value of '{}' is not a string", file, m.key());
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    DAEI_CHECK(v.is_object(), "{}: tensor '{}': entry is not an object", file, name);
    SafetensorsEntry e;
    e.name = name;
    auto dt = v.find("dtype");
    DAEI_CHECK(dt != v.end() && dt->is_string(), "{}: tensor '{}': missing dtype", file, name);
    e.dtype = dt->get<std::string>();
    const size_t esize = safetensors_dtype_size(e.dtype);
    DAEI_CHECK(esize > 0, "{}: tensor '{}': unknown or unsupported dtype '{}'", file, name, e.dtype);
    auto sh = v.find("shape");
    DAEI_CHECK(sh != v.end() && sh->is_array(), "{}: tensor '{}': missing shape", file, name);
    DAEI_CHECK(sh->size() <= 64, "{}: tensor '{}': shape has {} dimensions", file, name, sh->size());
    uint64_t numel = 1;
    bool overflow = false;
    for (const auto& d : *sh) {
      DAEI_CHECK(d.is_number_integer() && (d.is_number_unsigned() || d.get<int64_t>() >= 0),
                 "{}: tensor '{}': shape entries must be non-negative integers", file, name);
      const uint64_t dim = d.get<uint64_t>();
      DAEI_CHECK(dim <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                 "{}: tensor '{}': dimension {} too large", file, name, dim);
      e.shape.push_back(static_cast<int64_t>(dim));
      if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / dim) overflow = true;
      numel = overflow ? numel : numel * dim;
    }
    for (int64_t d : e.shape) if (d == 0) { overflow = false; numel = 0; }
    DAEI_CHECK(!overflow && numel <= std::numeric_limits<uint64_t>::max() / esize,
               "{}: tensor '{}': shape size overflows", file, name);
    auto off = v.find("data_offsets");
    DAEI_CHECK(off != v.end() && off->is_array() && off->size() == 2,
               "{}: tensor '{}': data_offsets must be [begin, end]", file, name);
    e.begin = entry_offset((*off)[0], file, name);
    e.end = entry_offset((*off)[1], file, name);
    DAEI_CHECK(e.begin <= e.end, "{}: tensor '{}': data_offsets [{}, {}] are reversed", file, name, e.begin, e.end);
    DAEI_CHECK(e.end <= data_len, "{}: tensor '{}': data_offsets [{}, {}] run past the data area ({} bytes)", file,
               name, e.begin, e.end, data_len);
    DAEI_CHECK(e.end - e.begin == numel * esize,
               "{}: tensor '{}': shape x dtype is {} bytes but data_offsets span {} bytes", file, name, numel * esize,
               e.end - e.begin);
    out.entries.push_back(std::move(e));
  }
  std::sort(out.entries.begin(), out.entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  // Empty tensors occupy no bytes and cannot overlap anything; the others are checked against the furthest end so far.
  const SafetensorsEntry* last = nullptr;
  for (const auto& b : out.entries) {
    if (b.begin == b.end) continue;
    DAEI_CHECK(last == nullptr || b.begin >= last->end, "{}: tensor '{}' [{}, {}] overlaps tensor '{}' [{}, {}]", file,
               b.name, b.begin, b.end, last ? last->name : "", last ? last->begin : 0, last ? last->end : 0);
    last = &b;
  }
  return out;
}

}  // namespace daei
