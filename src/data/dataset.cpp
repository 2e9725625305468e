#include "data/dataset.h"

#include <torch/torch.h>

#include "core/error.h"

namespace daei {

at::Tensor InMemoryDataset::noisy(const std::vector<int64_t>& idx) const {
  for (auto i : idx) DAEI_ASSERT(i >= 0 && i < size(), "row {} outside [0, {})", i, size());
  auto index = torch::tensor(idx, torch::kInt64);
  return noisy_.index_select(0, index).to(torch::kFloat32);
}

std::vector<std::string> InMemoryDataset::texts(const std::vector<int64_t>& idx) const {
  std::vector<std::string> out;
  for (auto i : idx) {
    DAEI_ASSERT(i >= 0 && i < size(), "row {} outside [0, {})", i, size());
    out.push_back(i < static_cast<int64_t>(texts_.size()) ? texts_[i] : std::string());
  }
  return out;
}

}  // namespace daei
