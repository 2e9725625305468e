#include "cli/embedding_parse.h"

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace daei::cli {

FloatMatrix parse_npy(const std::string& b, const std::string& path, const std::string& cmd) {
  DAEI_CHECK(b.size() >= 10 && b.compare(0, 6, "\x93NUMPY") == 0, "{}: {}: not a .npy file", cmd, path);
  const int major = static_cast<unsigned char>(b[6]);
  const size_t hl = major == 1 ? (static_cast<unsigned char>(b[8]) | static_cast<unsigned char>(b[9]) << 8)
                               : (b.size() >= 12 ? *reinterpret_cast<const uint32_t*>(b.data() + 8) : 0);
  const size_t off = major == 1 ? 10 : 12;
  DAEI_CHECK(off + hl <= b.size(), "{}: {}: truncated .npy header", cmd, path);
  const std::string h = b.substr(off, hl);
  const bool f4 = h.find("'<f4'") != std::string::npos, f8 = h.find("'<f8'") != std::string::npos;
  DAEI_CHECK(f4 || f8, "{}: {}: dtype must be float32 or float64 (little-endian), header {}", cmd, path, h);
  DAEI_CHECK(h.find("'fortran_order': False") != std::string::npos, "{}: {}: Fortran order is not supported", cmd, path);
  const auto s = h.find("'shape': ("), e = h.find(')', s);
  DAEI_CHECK(s != std::string::npos && e != std::string::npos, "{}: {}: no shape in the header", cmd, path);
  int64_t n = 0, d = 0;
  DAEI_CHECK(std::sscanf(h.c_str() + s + 10, "%ld, %ld", &n, &d) == 2 && n > 0 && d > 0,
             "{}: {}: shape must be (n, d), header {}", cmd, path, h);
  const size_t es = f4 ? 4 : 8, data_bytes = b.size() - off - hl;
  // n * d overflowed int64 for a shape such as (2^62, 4) (undefined behaviour; fuzz_embedding_input's probe).
  int64_t nd = 0;
  DAEI_CHECK(!__builtin_mul_overflow(n, d, &nd) && static_cast<uint64_t>(nd) <= data_bytes / es &&
                 data_bytes == static_cast<size_t>(nd) * es,
             "{}: {}: {} data bytes for shape ({}, {})", cmd, path, data_bytes, n, d);
  FloatMatrix m{n, d, std::vector<float>(static_cast<size_t>(nd))};
  const char* data = b.data() + off + hl;
  if (f4) {
    std::memcpy(m.values.data(), data, m.values.size() * 4);
  } else {
    for (size_t i = 0; i < m.values.size(); ++i) {
      double v;
      std::memcpy(&v, data + 8 * i, 8);
      m.values[i] = static_cast<float>(v);
    }
  }
  return m;
}

FloatMatrix parse_embedding_lines(std::istream& in, const std::string& path, const std::string& cmd) {
  FloatMatrix m;
  int64_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    DAEI_CHECK(!j.is_discarded() && j.is_object() && j.contains("embedding") && j["embedding"].is_array(),
               "{}: {}:{}: expected {{\"embedding\": [numbers]}}", cmd, path, line_no);
    const auto& emb = j["embedding"];
    for (const auto& v : emb) {
      DAEI_CHECK(v.is_number(), "{}: {}:{}: the embedding holds a non-number", cmd, path, line_no);
      m.values.push_back(v.get<float>());
    }
    DAEI_CHECK(m.rows == 0 || int64_t(emb.size()) == m.cols, "{}: {}:{}: {} values, the first line had {}", cmd,
               path, line_no, emb.size(), m.cols);
    m.cols = int64_t(emb.size());
    ++m.rows;
  }
  DAEI_CHECK(m.rows > 0 && m.cols > 0, "{}: {}: no embeddings", cmd, path);
  return m;
}

}  // namespace daei::cli
