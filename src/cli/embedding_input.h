// The embeddings a user gives `daei invert` and `daei zsinvert`: JSON lines {"embedding": [...]} or .npy
// (float32/float64 little-endian, C order, [n, d]); errors name the command and the file.
#pragma once
#include <string>
#include <torch/types.h>

namespace daei::cli {

at::Tensor read_npy(const std::string& path, const std::string& cmd);
at::Tensor read_jsonl(const std::string& path, const std::string& cmd);
// By extension (.npy, else JSON lines), float32 [n, d]; refuses NaN and infinite values.
at::Tensor read_embeddings(const std::string& path, const std::string& cmd);

}  // namespace daei::cli
