// Shared by the corrector, correction and hypothesis-cache tests: small models with seeded random weights (T5 d_model
// 32, 1+1 layers, a 40-piece SentencePiece vocabulary), a hashed-word clean embedder and its noisy release.
#pragma once
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>
#include "temp_dir.h"
#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/safetensors.h"
#include "data/cache.h"
#include "dist/communicator.h"
#include "eval/correction.h"
#include "model/attack/corrector.h"
#include "model/attack/dae.h"
#include "model/release/embedder.h"
#include "model/attack/inverter.h"
#include "model/text/tokenizer_spm.h"
#include "stages/recipes/hypotheses.h"
#include "stages/recipes/token_init.h"
#include "test_seed.h"
#include "tiny_t5.h"

namespace daei::corrector_test {
using namespace daei;
namespace fs = std::filesystem;


inline constexpr int64_t kDim = 16, kRepeat = 2;

inline const char* const kWords[] = {"the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away", "from", "home",
                        "red", "blue", "green", "house", "tree", "river", "stone", "light"};

inline std::string sentence(int i, int n = 6) {
  std::string s;
  for (int k = 0; k < n; ++k) s += std::string(k ? " " : "") + kWords[(i * 7 + k * 3 + k * k) % 20];
  return s;
}

// One tiny SentencePiece model for the whole test binary.
inline const SpmTokenizer& tokenizer() {
  static TempDir dir("corrector-spm");
  static SpmTokenizer tok = [] {
    {
      std::ofstream out(dir.p / "corpus.txt");
      for (int i = 0; i < 400; ++i) out << sentence(i, 8) << "\n";
    }
    SpmTokenizer::train((dir.p / "corpus.txt").string(), 40, (dir.p / "spm").string());
    return SpmTokenizer((dir.p / "spm.model").string());
  }();
  return tok;
}

inline T5Config tiny_t5() { return test::tiny_t5_config(); }

inline Corrector tiny_corrector(uint64_t seed = 3) {
  torch::manual_seed(test::seed(seed));
  CorrectorConfig c;
  c.dim = kDim;
  c.repeat = kRepeat;
  c.t5 = tiny_t5();
  Corrector m(c);
  // A LayerNorm that is not the identity affine map, so the test sees that it is applied.
  torch::NoGradGuard ng;
  m->layernorm->weight.uniform_(0.5, 1.5);
  m->layernorm->bias.uniform_(-0.2, 0.2);
  m->eval();
  return m;
}

// An inverter of the corrector's sizes with seeded random weights.
inline Inverter tiny_inverter(uint64_t seed = 5) {
  torch::manual_seed(test::seed(seed));
  InverterConfig ic;
  ic.dim = kDim;
  ic.repeat = kRepeat;
  ic.t5 = tiny_t5();
  return Inverter(ic);
}

// Larger weights: outputs that depend on the inputs, so later correction rounds propose new texts.
inline Corrector lively_corrector() {
  auto m = tiny_corrector(9);
  torch::NoGradGuard ng;
  for (auto& p : m->parameters()) p.mul_(4.0);
  return m;
}

// A deterministic clean embedder: hashed word counts, L2-normalised (the zero vector for no words).
class HashEmbedder final : public Embedder {
 public:
  int64_t dim() const override { return kDim; }
  std::string id() const override { return "hash-16"; }
  at::Tensor embed(const std::vector<std::string>& texts) const override {
    auto out = torch::zeros({int64_t(texts.size()), kDim});
    for (size_t i = 0; i < texts.size(); ++i) {
      std::istringstream in(texts[i]);
      std::string w;
      while (in >> w) {
        const size_t h = std::hash<std::string>{}(w);
        out[i][int64_t(h % kDim)] += (h >> 20) % 2 ? 1.0 : -1.0;
        out[i][int64_t((h >> 8) % kDim)] += 0.5;
      }
      auto n = out[i].norm();
      if (n.item<float>() > 0) out[i] /= n;
    }
    return out;
  }
};

inline std::shared_ptr<NoisyEmbedder> noisy_embedder(double sigma = 0.05, uint64_t seed = 11) {
  return std::make_shared<NoisyEmbedder>(std::make_shared<HashEmbedder>(), sigma, seed);
}

// A small seeded DAE at σ 0.05, as the correction's shield.
inline DenoiseFn toy_dae() {
  torch::manual_seed(test::seed(17));
  DaeOptions o;
  o.dim = kDim;
  o.hidden = 32;
  o.depth = 1;
  o.dropout = 0;
  auto dae = std::make_shared<Dae>(o);
  (*dae)->eval();
  return [dae](const at::Tensor& y) { return (*dae)->forward(y, torch::full({y.size(0)}, 0.05)); };
}

// B texts to correct: noisy embeddings of sentence(b, 5), hypotheses sentence(b + 3, 3), ids "test/b".
struct CorrectionInputs {
  at::Tensor y;
  std::vector<std::string> initial, ids;
};
inline CorrectionInputs correction_inputs(int64_t B) {
  CorrectionInputs in;
  std::vector<std::string> truth;
  for (int64_t b = 0; b < B; ++b) {
    truth.push_back(sentence(int(b), 5));
    in.initial.push_back(sentence(int(b) + 3, 3));
    in.ids.push_back("test/" + std::to_string(b));
  }
  in.y = noisy_embedder()->embed(truth, in.ids);
  return in;
}

inline at::Tensor hyp_ids(const std::vector<std::string>& texts, int64_t max_len = 16) {
  return tokenizer().encode_batch(texts, max_len).input_ids;
}


}  // namespace daei::corrector_test
