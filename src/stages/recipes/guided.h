// The T5 inverter guided by the bag of words (issue 65 item 4): the inverter of stage 2 that also reads, after its
// 16 embedding tokens, the word pieces of a bag-of-words model's top guided.words words of the same input (as extra
// encoder tokens, embedded by the T5's own token table). The bag of words finds content words the from-scratch T5
// does not; the T5 orders them and adds the function words the bag of words leaves out.
//   guided-noisy  inputs y;         guides from bow-noisy models
//   guided-dae    inputs DAE(y, σ₀); guides from bow-dae models
//   guided-clean  clean inputs;     guides from bow-clean models (a reference, reference.enabled)
// A model's guesses on texts it trained on are better than on new ones, so the training rows' guides come from
// guided.folds models, each trained (the bow.* budget, its steps cut to as many passes over its rows as the bow stage
// makes over all of them: guided.fold_steps) on the other folds' rows: the inverter sees guides as good as
// the ones it will get, and learns how far to trust them. Held-out rows and the evaluation use the bow stage's own
// model (bow-noisy, ...), trained on every training row and on no val or test text.
// Folder: runs/NAME/<stage>/folds/F/ (the fold models, each a bow stage folder), guidance/train.txt (a line a training
// row), and the inverter's own checkpoints and final/inverter/ (inverter.json names guide words and bow stage).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/attack/bow.h"
#include "stages/recipes/stage2.h"

namespace daei {

class Communicator;
class Config;

struct GuidedOptions {
  int64_t folds = 2;       // fold models for the training rows' guides
  int64_t words = 8;       // words a guide line holds, most probable first
  int64_t max_pieces = 32; // word pieces of a guide line the encoder reads (its eos included)
  int64_t fold_steps = 0;  // a fold model's steps; 0 = bow.steps × (folds − 1) / folds, the bow stage's passes
  bool copy = false;       // the inverter's copy gate (InverterConfig::guide_copy)
  static GuidedOptions from_config(const Config& cfg);
};

// Row r of `data` is in fold r % folds. held_out: that fold's rows; otherwise every other row. Row i of the result is
// the i-th such row of `data` (texts and inputs both).
InverterTrainData fold_rows(const InverterTrainData& data, int64_t folds, int64_t fold, bool held_out);

// A guide line: the first `words` words of a row's ranking, joined by spaces.
std::string guide_line(const RankedWords& r, int64_t words);
// Guide lines of inputs, by `bow`, in blocks of 512 rows.
std::vector<std::string> guide_lines(BowInverterImpl& bow, const at::Tensor& inputs, int64_t words);

// The training rows' guide lines (stage_dir/guidance/train.txt): trains the fold models that are not finished
// (stage_dir/folds/F, the bow stage of `val` for its answer rule), then rank 0 writes each row's line from the model
// that did not train on it. Reused when the file exists. Collective. Returns a fold stage's non-zero exit when it
// stopped early (lines then empty), 0 with `lines` filled otherwise.
int fold_guidance(const Config& cfg, Communicator& comm, const std::string& tag, const std::string& stage_dir,
                  const InverterTrainData& data, const InverterTrainData& val, bool resume, bool force,
                  std::vector<std::string>& lines);

// `data` with its guide lines: `lines` by row (training rows), or computed by `bow` from the rows' inputs (val).
InverterTrainData with_guides(InverterTrainData data, std::shared_ptr<const std::vector<std::string>> lines);
InverterTrainData with_guides(InverterTrainData data, std::shared_ptr<BowInverterImpl> bow, int64_t words);

}  // namespace daei
