// Data of the reference systems outside the threat model (paper's upper bound): the clean-trained inverter behind
// CLEAN-TO-CLEAN and CLEAN-TO-NOISY reads clean embeddings of the training texts (cache/train/clean, written only
// with cache.clean_train_reference and marked offline_eval_only). It lives in the evaluation library, which the
// attack stages do not link, and refuses unless the config says reference.enabled: true.
#pragma once
#include <string>

#include "stages/stage2.h"

namespace daei {
class Config;

// Refuses unless reference.enabled is set and the clean training cache exists.
void require_clean_train_reference(const Config& cfg, const std::string& run_dir);
InverterTrainData clean_train_data(const Config& cfg, const std::string& run_dir);
// The clean rows of another split (val: the clean inverter's held-out CE), from cache/<split>/clean.
InverterTrainData clean_split_data(const Config& cfg, const std::string& run_dir, const std::string& split);

}  // namespace daei
