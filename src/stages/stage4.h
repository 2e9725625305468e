// Stage 4 (paper §III-D; reference notes §1.2, §2.4): the corrector behind a frozen "DAE shield". For every training
// row: the target ẽ = DAE₃(y), the stage-3 inverter's hypothesis x̂ (cache/hyp-train: its text and its noisy
// embedding f̃(x̂), queried like any release) and ê = DAE₃(f̃(x̂)); the corrector — a fresh T5 of the inverter's size
// with three input MLPs — learns the true text with cross-entropy. lr 5e-4. Writes stage4/final/corrector/.
#pragma once
#include <memory>
#include <string>

#include "data/dataset.h"
#include "model/dae.h"
#include "model/tokenizer_spm.h"

namespace daei {

class Communicator;
class Config;
class Trainer;
class CorrectorImpl;

class Stage4 {
 public:
  // train: the noisy training cache; hyps: cache/hyp-train (row r = the hypothesis of training row r).
  Stage4(const Config& cfg, Communicator& comm, const std::string& stage_dir, std::shared_ptr<const NoisyDataset> train,
         std::shared_ptr<const NoisyDataset> hyps, std::shared_ptr<SpmTokenizer> tok, const std::string& dae_dir,
         bool resume, bool force);
  ~Stage4();
  int run();
  Trainer& trainer() { return *trainer_; }
  std::shared_ptr<CorrectorImpl> corrector() { return corrector_; }

 private:
  std::shared_ptr<const NoisyDataset> train_, hyps_;
  std::shared_ptr<SpmTokenizer> tok_;
  Dae dae_{nullptr};
  double sigma0_ = 0;
  std::shared_ptr<CorrectorImpl> corrector_;
  int64_t max_len_, hyp_len_;
  std::unique_ptr<Trainer> trainer_;
};

}  // namespace daei
