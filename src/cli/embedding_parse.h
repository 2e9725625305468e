// The bytes of `invert --input` / `zsinvert --input` turned into a float32 matrix, without libtorch, so that
// tests/fuzz/fuzz_embedding_input.cpp fuzzes them: a .npy file (header + data) and JSON lines {"embedding": [...]}.
// Errors are daei::Error naming the command and the file.
#pragma once
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace daei::cli {

struct FloatMatrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> values;  // rows x cols, row-major
};

// A whole .npy file: float32/float64 little-endian, C order, shape (n, d) with n, d > 0.
FloatMatrix parse_npy(const std::string& bytes, const std::string& path, const std::string& cmd);
// JSON lines, one {"embedding": [numbers]} a line, every line as long as the first; blank lines skipped.
FloatMatrix parse_embedding_lines(std::istream& in, const std::string& path, const std::string& cmd);

}  // namespace daei::cli
