// The bag-of-words inverter's stage (issue 65 item 3; the model: model/attack/bow.h), on the shared Trainer:
//   bow-noisy  inputs y (runs/NAME/bow-noisy)
//   bow-dae    inputs DAE(y, σ₀), the frozen stage-1 DAE (runs/NAME/bow-dae)
//   bow-clean  inputs clean f(x): a reference outside the threat model (reference.enabled)
// One budget for all (the bow.* keys). The vocabulary is the bow.vocab_size most frequent content words of the
// training texts (model/text/words.h); a text's target is its words' multi-hot vector normalised to sum 1, and the
// loss the cross-entropy of the softmax against it (a text with no vocabulary word contributes 0). Held out: the
// content F1 of the top 3 words on train.heldout_rows val rows. At the end the answer rule (exactly k words, or up to
// bow.k_max words of probability >= τ) is chosen by mean content F1 on bow.k_rows val rows, inputs prepared as in
// training (final/bow/k_choice.json: every rule tried).
// Final: runs/NAME/<stage>/final/bow/.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/attack/bow.h"
#include "stages/recipes/stage2.h"  // InverterTrainData: the same inputs as the inverters

namespace daei {

class Communicator;
class Config;
class Trainer;

// The most frequent content words of `texts` (ties: alphabetical), at most `size`; each text's words as indices
// into them (distinct, in first-seen order).
struct BowVocabulary {
  std::vector<std::string> words;
  std::vector<std::vector<int32_t>> text_words;
};
BowVocabulary bow_vocabulary(const std::vector<std::string>& texts, int64_t size);
// The soft targets of rows: [n, |words|], each row's words at 1/count (a row without words is all zero).
at::Tensor bow_targets(const std::vector<std::vector<int32_t>>& text_words, const std::vector<int64_t>& rows,
                       int64_t vocab);
// Mean content F1 of the rows' answers (RankedWords::answer(k, min_prob)) against their texts.
double mean_content_f1(const std::vector<RankedWords>& rows, const std::vector<std::string>& texts, int64_t k,
                       double min_prob);
// The answer rule of best mean content F1 on val rows, among exactly k words (k = 1..k_max) and up to k_max words of
// probability >= τ (τ on a fixed grid, kMinProbGrid); ties go to the first tried. Every rule's score in `tried`.
struct AnswerRule {
  int64_t k = 1;
  double min_prob = 0;
  double content_f1 = 0;
  std::vector<std::pair<std::string, double>> tried;  // "k=3" / "p>=0.05" → mean content F1
};
AnswerRule choose_answer_rule(const std::vector<RankedWords>& rows, const std::vector<std::string>& texts,
                              int64_t k_max);

class BowStage {
 public:
  BowStage(const Config& cfg, Communicator& comm, const std::string& tag, const std::string& stage_dir,
           InverterTrainData data, InverterTrainData val, bool resume, bool force);
  ~BowStage();
  int run();
  BowInverter& model() { return model_; }

 private:
  InverterTrainData data_, val_;
  BowVocabulary vocab_;
  BowInverter model_{nullptr};
  std::unique_ptr<Trainer> trainer_;
};

}  // namespace daei
