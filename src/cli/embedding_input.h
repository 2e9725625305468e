// The embeddings a user gives `daei invert` and `daei zsinvert`: JSON lines {"embedding": [...]} or .npy
// (float32/float64 little-endian, C order, [n, d]); errors name the command and the file. Also their shared
// --input/--output flags and the writing of the recovered texts.
#pragma once
#include <string>
#include <torch/types.h>

namespace CLI {
class App;
}

namespace daei::cli {

struct EmbeddingFiles {
  std::string input;   // --input: the embeddings
  std::string output;  // --output: the JSON lines of recovered texts (empty: stdout)
};
void add_embedding_files(CLI::App& app, EmbeddingFiles& files);
// Writes `jsonl` (one line a text) to --output, or stdout without one, and logs "[cmd] N texts recovered with SYSTEM".
void write_recovered(const std::string& cmd, const EmbeddingFiles& files, const std::string& jsonl, size_t texts,
                     const std::string& system);

at::Tensor read_npy(const std::string& path, const std::string& cmd);
at::Tensor read_jsonl(const std::string& path, const std::string& cmd);
// By extension (.npy, else JSON lines), float32 [n, d]; refuses NaN and infinite values.
at::Tensor read_embeddings(const std::string& path, const std::string& cmd);

}  // namespace daei::cli
