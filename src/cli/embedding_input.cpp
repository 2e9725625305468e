#include "cli/embedding_input.h"

#include "cli/embedding_parse.h"

#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <fstream>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"

namespace daei::cli {

namespace {
at::Tensor to_tensor(FloatMatrix&& m) {
  return torch::from_blob(m.values.data(), {m.rows, m.cols}, torch::kFloat32).clone();
}
}  // namespace

at::Tensor read_npy(const std::string& path, const std::string& cmd) {
  return to_tensor(parse_npy(read_file(path), path, cmd));
}

at::Tensor read_jsonl(const std::string& path, const std::string& cmd) {
  std::ifstream in(path);
  DAEI_CHECK(in.good(), "{}: {}: cannot open", cmd, path);
  return to_tensor(parse_embedding_lines(in, path, cmd));
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
