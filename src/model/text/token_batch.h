// Right-padding token-id rows into (B, L) id and mask tensors, shared by the tokenizers.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>
#include <torch/types.h>

namespace daei {

struct TokenBatch {
  torch::Tensor input_ids;       // (B, L) int64, padded with pad_id
  torch::Tensor attention_mask;  // (B, L) int64 1/0
};

// L = the longest row, at least min_len.
inline TokenBatch pad_token_rows(const std::vector<std::vector<int64_t>>& rows, int64_t pad_id, int64_t min_len) {
  int64_t L = min_len;
  for (const auto& r : rows) L = std::max<int64_t>(L, static_cast<int64_t>(r.size()));
  const auto B = static_cast<int64_t>(rows.size());
  TokenBatch b{torch::full({B, L}, pad_id, torch::kLong), torch::zeros({B, L}, torch::kLong)};
  auto ids = b.input_ids.accessor<int64_t, 2>();
  auto mask = b.attention_mask.accessor<int64_t, 2>();
  for (int64_t i = 0; i < B; ++i)
    for (size_t j = 0; j < rows[i].size(); ++j) {
      ids[i][j] = rows[i][j];
      mask[i][j] = 1;
    }
  return b;
}

}  // namespace daei
