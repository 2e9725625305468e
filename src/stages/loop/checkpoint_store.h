// The checkpoints of one stage folder: stageK/ckpt-XXXXXXXX/{model.safetensors, optim.pt, state.json, DONE} and
// stageK/final/. A checkpoint is written under a temporary name and renamed into place; DONE, written last, holds
// the SHA-256 of every file, so "complete" (DONE exists) and "intact" (every file matches) can be told apart. The
// newest intact checkpoint is the one a resume loads (a damaged newer one is skipped: fall-back), and pruning keeps
// the last keep_last intact ones (a damaged one is removed and never counted). The contents do not depend on the
// world size: parameters and AdamW state are replicated and randomness is keyed by step.
// File work only, for rank 0; the Trainer adds the barriers between the steps.
#pragma once
#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "core/safetensors.h"
#include "stages/loop/stage_files.h"

namespace torch::optim {
class Optimizer;
}

namespace daei {

class CheckpointStore {
 public:
  CheckpointStore(std::string stage_dir, std::string tag, int64_t keep_last);

  static std::string checkpoint_name(int64_t step);          // ckpt-XXXXXXXX
  static bool is_checkpoint_name(const std::string& name);
  static bool is_complete(const std::string& dir);            // has DONE
  // DONE present and every file it lists has its recorded SHA-256; "" when good, else what is wrong.
  static std::string verify(const std::string& dir);
  // The newest checkpoint of stage_dir that verifies ("" when none); each damaged newer one is logged and skipped.
  static std::string latest(const std::string& stage_dir);

  std::string dir_of(const std::string& name) const { return stage_dir_ + "/" + name; }
  // Writes checkpoint `name` into a temporary folder and renames it into place: model.safetensors (when modules
  // are given), then what `extra(tmp)` writes (when set), optim.pt (when optim is given) and state.json. Without
  // DONE it is not complete yet (seal).
  void write(const std::string& name, const ModuleList* modules, const std::function<void(const std::string&)>& extra,
             const torch::optim::Optimizer* optim, const CheckpointState& state) const;
  // DONE with the SHA-256 of every file of `name`, then prune.
  void seal(const std::string& name, int64_t step);
  // Keeps the last keep_last checkpoints that verify (all when keep_last ≤ 0); removes a damaged one. Each is
  // verified once per store; `just_written` counts as verified (its DONE was computed from its files a moment ago).
  void prune(const std::string& just_written);
  // Loads modules and optimizer from checkpoint `dir` after checking that it was trained with this global batch on
  // this many rows (Error naming the file otherwise); returns its state (step, world_size).
  CheckpointState load(const std::string& dir, const ModuleList& modules, torch::optim::Optimizer& optim,
                       int64_t global_batch, int64_t n_rows) const;

 private:
  std::string stage_dir_, tag_;
  int64_t keep_last_;
  std::set<std::string> verified_;  // checkpoint names whose files matched their DONE
};

}  // namespace daei
