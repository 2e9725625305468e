// Stage 1 (paper §III-A, reference notes §2.1–2.3): the residual DAE h(y, σ) = y + r(y, σ), trained on noisy
// embeddings alone with the SURE loss, on the shared Trainer. Writes runs/NAME/stage1/final/{model.safetensors,
// dae.json, state.json, DONE}; dae.json holds the DAE's shape and the release noise level σ₀.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "data/dataset.h"
#include "model/dae.h"
#include "stages/sure.h"

namespace daei {

class Communicator;
class Config;
class Trainer;

DaeOptions dae_options(const Config& cfg, int64_t dim);
// A DAE built from dae.json in `dir` with the weights of dir/model.safetensors, in eval mode. sigma0_out: σ₀.
Dae load_dae(const std::string& dir, double* sigma0_out = nullptr);

class Stage1 {
 public:
  // val may be null (no periodic evaluation).
  Stage1(const Config& cfg, Communicator& comm, const std::string& stage_dir, std::shared_ptr<const NoisyDataset> train,
         std::shared_ptr<const NoisyDataset> val, bool resume);
  ~Stage1();
  int run();  // kExitOk or kExitStopped
  Dae& dae() { return dae_; }
  Trainer& trainer() { return *trainer_; }
  // The SURE estimate of E‖h(y) − x‖² on (up to eval_rows of) a noisy set, at σ₀, in eval mode; collective.
  std::map<std::string, double> evaluate(const NoisyDataset& data);

 private:
  Communicator& comm_;
  std::string stage_dir_;
  std::shared_ptr<const NoisyDataset> train_, val_;
  Dae dae_{nullptr};
  SureOptions sure_;
  SigmaSchedule sched_;
  uint64_t seed_;
  int64_t eval_rows_;
  std::unique_ptr<Trainer> trainer_;
};

}  // namespace daei
