// What a training stage reads: rows of noisy embeddings (and their texts) by global row index. The HDF5 cache
// reader implements it; tests use an in-memory one. Training code never sees clean embeddings through this
// interface — clean rows live in files marked offline_eval_only that only evaluation opens.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include <torch/types.h>

namespace daei {

class NoisyDataset {
 public:
  virtual ~NoisyDataset() = default;
  virtual int64_t size() const = 0;
  virtual int64_t dim() const = 0;
  virtual double sigma() const = 0;  // the release interface's noise level the rows were drawn at
  // float32 [idx.size(), dim]; every index in [0, size()).
  virtual at::Tensor noisy(const std::vector<int64_t>& idx) const = 0;
  virtual std::vector<std::string> texts(const std::vector<int64_t>& idx) const = 0;
  // A hint: rows idx (and their texts when with_texts) will be read next; a reader may load them in the
  // background. The default does nothing. Results never depend on it.
  virtual void prefetch(const std::vector<int64_t>& idx, bool with_texts) const {
    (void)idx;
    (void)with_texts;
  }
};

// Rows held in memory (tests, small evaluation sets).
class InMemoryDataset final : public NoisyDataset {
 public:
  InMemoryDataset(at::Tensor noisy, std::vector<std::string> texts, double sigma)
      : noisy_(std::move(noisy)), texts_(std::move(texts)), sigma_(sigma) {}
  int64_t size() const override { return noisy_.size(0); }
  int64_t dim() const override { return noisy_.size(1); }
  double sigma() const override { return sigma_; }
  at::Tensor noisy(const std::vector<int64_t>& idx) const override;
  std::vector<std::string> texts(const std::vector<int64_t>& idx) const override;

 private:
  at::Tensor noisy_;
  std::vector<std::string> texts_;
  double sigma_;
};

}  // namespace daei
