// The bag-of-words inverter (Song & Raghunathan, CCS 2020; vec2text's `inversion_bow`): the field's cheapest attack, a
// multi-label classifier from an embedding to the words of its text. Ours predicts content words only (a first try
// over every word collapsed to function words, issue 65):
//   standardise (the training inputs' mean and scale, fixed buffers) → depth × (Linear → GELU) → Linear → logits
//   over `words`, the most frequent content words of the attacker's training texts (model/text/words.h).
// Trained on the normalised multi-hot target of each text (a soft-target cross-entropy, stages/recipes/bow.h); it
// answers with its most probable words, most probable first: at most k, and only those of probability >= min_prob
// (always at least one), both chosen on val texts, so a long text can get more words than a short one.
// On disk a folder: model.safetensors (layers.N.weight/bias, input_mean, input_scale) + bow.json (BowOptions,
// the vocabulary, k).
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <string>
#include <vector>

namespace daei {

struct BowOptions {
  int64_t dim = 0;       // embedding dimension
  int64_t hidden = 1024;
  int64_t depth = 1;     // hidden layers; 0 = a linear map (the probe of issue 65 item 2)
  int64_t k = 3;         // at most this many words in an answer
  double min_prob = 0;   // and only words of at least this probability (the first word always); 0 = exactly k

  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("dim", s.dim), v("hidden", s.hidden), v("depth", s.depth), v("k", s.k), v("min_prob", s.min_prob);
  }
};

// A row's most probable words and their probabilities, most probable first.
struct RankedWords {
  std::vector<std::string> words;
  std::vector<double> probs;
  // The answer: the first k words, cut where the probability falls below min_prob (never below one word).
  std::string answer(int64_t k, double min_prob) const;
};

class BowInverterImpl : public torch::nn::Module {
 public:
  BowInverterImpl(BowOptions opt, std::vector<std::string> words);
  at::Tensor forward(const at::Tensor& e);  // [n, dim] → logits [n, |words|]
  // Sets the standardisation from training inputs (rows of the input the model will read).
  void fit_standardisation(const at::Tensor& inputs);
  // The k most probable words of each row with their probabilities (no gradient; eval mode for the call).
  std::vector<RankedWords> ranked(const at::Tensor& e, int64_t k);
  // Each row's answer (options' k and min_prob), words joined with spaces: the row's recovered text.
  std::vector<std::string> recover(const at::Tensor& e);

  const BowOptions& options() const { return opt_; }
  void set_answer(int64_t k, double min_prob) { opt_.k = k, opt_.min_prob = min_prob; }
  const std::vector<std::string>& words() const { return words_; }
  void save(const std::string& dir) const;

  torch::nn::Sequential layers{nullptr};
  at::Tensor input_mean, input_scale;

 private:
  BowOptions opt_;
  std::vector<std::string> words_;
};
TORCH_MODULE(BowInverter);

// A folder written by save; refused in one line when it is not one.
BowInverter load_bow_inverter(const std::string& dir);

}  // namespace daei
