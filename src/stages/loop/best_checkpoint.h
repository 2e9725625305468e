// Model selection by a held-out score. DAEI keeps the stage-3 checkpoint of best in-domain validation BLEU
// (reference notes §2.4, §7); `stage3.select_by: heldout_bleu` does the same here. The best model so far lives in
// STAGE/best/ (the modules' folders, written by the stage's saver) with best.json {step, score}; the stage's final
// folder is then that model, not the last step's. Rank 0 only: every rank computes the same score.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace daei {

class BestKeeper {
 public:
  // Reads STAGE/best/best.json when there (a resumed run keeps its best).
  explicit BestKeeper(const std::string& stage_dir);
  bool has() const { return step_ >= 0; }
  double score() const { return score_; }
  int64_t step() const { return step_; }
  const std::string& dir() const { return dir_; }
  // When `score` beats the best so far (or there is none), save(tmp) writes the model into a temporary folder that
  // replaces STAGE/best/ whole, best.json included. True when it did.
  bool offer(int64_t step, double score, const std::function<void(const std::string& dir)>& save);

 private:
  std::string dir_;
  int64_t step_ = -1;
  double score_ = 0;
};

}  // namespace daei
