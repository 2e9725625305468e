#include "cli/embedding_input.h"

#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"

namespace daei::cli {

at::Tensor read_npy(const std::string& path, const std::string& cmd) {
  const std::string b = read_file(path);
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
  const size_t es = f4 ? 4 : 8;
  DAEI_CHECK(b.size() - off - hl == static_cast<size_t>(n * d) * es, "{}: {}: {} data bytes for shape ({}, {})",
             cmd, path, b.size() - off - hl, n, d);
  auto t = torch::empty({n, d}, f4 ? torch::kFloat32 : torch::kFloat64);
  std::memcpy(t.data_ptr(), b.data() + off + hl, b.size() - off - hl);
  return t.to(torch::kFloat32);
}

at::Tensor read_jsonl(const std::string& path, const std::string& cmd) {
  std::ifstream in(path);
  DAEI_CHECK(in.good(), "{}: {}: cannot open", cmd, path);
  std::vector<std::vector<float>> rows;
  int64_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    DAEI_CHECK(!j.is_discarded() && j.is_object() && j.contains("embedding") && j["embedding"].is_array(),
               "{}: {}:{}: expected {{\"embedding\": [numbers]}}", cmd, path, line_no);
    std::vector<float> r;
    for (const auto& v : j["embedding"]) {
      DAEI_CHECK(v.is_number(), "{}: {}:{}: the embedding holds a non-number", cmd, path, line_no);
      r.push_back(v.get<float>());
    }
    DAEI_CHECK(rows.empty() || r.size() == rows[0].size(), "{}: {}:{}: {} values, the first line had {}", cmd, path,
               line_no, r.size(), rows.empty() ? 0 : rows[0].size());
    rows.push_back(std::move(r));
  }
  DAEI_CHECK(!rows.empty() && !rows[0].empty(), "{}: {}: no embeddings", cmd, path);
  auto t = torch::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
  for (size_t i = 0; i < rows.size(); ++i) std::memcpy(t[i].data_ptr<float>(), rows[i].data(), rows[i].size() * 4);
  return t;
}

at::Tensor read_embeddings(const std::string& path, const std::string& cmd) {
  at::Tensor y = path.size() > 4 && path.substr(path.size() - 4) == ".npy" ? read_npy(path, cmd) : read_jsonl(path, cmd);
  DAEI_CHECK(torch::isfinite(y).all().item<bool>(), "{}: {}: the embeddings hold NaN or infinite values", cmd, path);
  return y;
}

void add_embedding_files(CLI::App& app, EmbeddingFiles& files) {
  app.add_option("--input", files.input, "embeddings: .jsonl or .npy [n, d]")->required();
  app.add_option("--output", files.output, "JSON lines of recovered texts (default stdout)");
}

void write_recovered(const std::string& cmd, const EmbeddingFiles& files, const std::string& jsonl, size_t texts,
                     const std::string& system) {
  if (files.output.empty()) std::cout << jsonl;
  else write_file_atomic(files.output, jsonl);
  LOG_INFO("[{}] {} texts recovered with {}{}", cmd, texts, system, files.output.empty() ? "" : " into " + files.output);
}

}  // namespace daei::cli
