// Shared by unit and MPI tests: deterministic toy texts of varied length, their embeddings, and a config for a tiny
// T5 inverter (stages 2–3 at test sizes, seconds a run).
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "data/dataset.h"
#include "test_seed.h"

namespace daei::test {

inline std::vector<std::string> toy_texts(int64_t n, uint64_t seed = 5) {
  static const std::vector<std::string> words{"the", "cat", "sat", "on", "a", "mat", "dog", "ran", "to", "red",
                                              "house", "big", "small", "tree", "under", "blue", "sky", "bird",
                                              "sings", "loud", "river", "flows", "past", "old", "mill"};
  SplitMix r(test::seed(seed));
  std::vector<std::string> out;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = 2 + static_cast<int64_t>(r.below(9));  // 2..10 words: lengths differ within a batch
    std::string t;
    for (int64_t k = 0; k < len; ++k) t += (k ? " " : "") + words[r.below(words.size())];
    out.push_back(t);
  }
  return out;
}

// Embeddings that determine the text (a fixed random projection of a bag of words plus position), noised at sigma.
inline std::shared_ptr<InMemoryDataset> toy_dataset(const std::vector<std::string>& texts, int64_t dim, double sigma,
                                                    uint64_t seed = 9, at::Tensor* clean_out = nullptr) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(test::seed(seed));
  const int64_t n = static_cast<int64_t>(texts.size());
  auto clean = torch::zeros({n, dim});
  for (int64_t i = 0; i < n; ++i) {
    uint64_t h = hash_key(texts[i]);
    auto gi = at::make_generator<at::CPUGeneratorImpl>(h);
    clean[i] = torch::randn({dim}, gi);
  }
  clean = clean / clean.norm(2, 1, true);
  if (clean_out) *clean_out = clean;
  auto noisy = clean + sigma * torch::randn({n, dim}, g);
  return std::make_shared<InMemoryDataset>(noisy, texts, sigma);
}

// Config for a tiny inverter run of `steps` steps at global batch `batch`.
inline Config toy_config(int64_t steps, int64_t batch) {
  auto c = Config::defaults();
  for (const std::string s :
       {"inverter.d_model=32", "inverter.d_kv=8", "inverter.d_ff=64", "inverter.num_layers=1",
        "inverter.num_decoder_layers=1", "inverter.num_heads=2", "inverter.repeat_tokens=4", "inverter.dropout=0.0",
        "inverter.vocab_size=40", "inverter.max_length_train=16", "inverter.max_length_eval=16",
        "stage2.warmup_steps=2", "stage3.warmup_steps=2", "train.log_every=1", "train.ckpt_every=100",
        "train.progress_every_s=100.0", "train.plot=false", "dae.hidden=32", "dae.depth=2", "dae.dropout=0.1"}) {
    c.set(s, "test");
  }
  c.set(fmt::format("run.seed={}", test::seed(uint64_t(c.integer("run.seed")))), "test");
  c.set(fmt::format("stage2.steps={}", steps), "test");
  c.set(fmt::format("stage3.steps={}", steps), "test");
  c.set(fmt::format("stage1.steps={}", steps), "test");
  c.set(fmt::format("stage2.batch_size={}", batch), "test");
  c.set(fmt::format("stage3.batch_size={}", batch), "test");
  c.set(fmt::format("stage1.batch_size={}", batch), "test");
  return c;
}

// Largest |a − b| over the tensors of two safetensors files with the same names.
inline double max_diff_files(const std::string& a, const std::string& b) {
  auto ta = load_safetensors(a), tb = load_safetensors(b);
  double m = ta.size() == tb.size() ? 0.0 : INFINITY;
  for (auto& [k, v] : ta) {
    auto it = tb.find(k);
    m = std::max(m, it == tb.end() ? INFINITY : (v - it->second).abs().max().item<double>());
  }
  return m;
}

}  // namespace daei::test
