// Data of the reference systems outside the threat model (paper's upper bound): the clean-trained inverter behind
// CLEAN-TO-CLEAN and CLEAN-TO-NOISY reads clean embeddings of the training texts (cache/train/clean, written only
// with cache.clean_train_reference and marked offline_eval_only). It lives in the evaluation library, which the
// attack stages do not link, and refuses unless the config says reference.enabled: true.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "stages/recipes/stage2.h"

namespace daei {
class Config;
class NoisyDataset;
class NoisyEmbedder;

// Refuses unless reference.enabled is set and the clean training cache exists.
void require_clean_train_reference(const Config& cfg, const std::string& run_dir);
InverterTrainData clean_train_data(const Config& cfg, const std::string& run_dir);
// The clean rows of another split (val: the clean inverter's held-out CE), from cache/<split>/clean.
InverterTrainData clean_split_data(const Config& cfg, const std::string& run_dir, const std::string& split);

// The clean corrector (reference.corrector, the corrected clean-to-* rows): refuses unless reference.enabled and
// reference.corrector are set and the clean training cache exists.
void require_clean_corrector_reference(const Config& cfg, const std::string& run_dir);
// cache/<split> seen as a dataset whose "noisy" rows are the clean ones (the clean corrector's targets e).
std::shared_ptr<const NoisyDataset> clean_rows_as_dataset(const Config& cfg, const std::string& run_dir,
                                                          const std::string& split);
// Rows [begin, end) of cache/<split>/clean: the clean inverter's input when it decodes its hypotheses.
std::function<at::Tensor(int64_t, int64_t)> clean_rows_reader(const Config& cfg, const std::string& run_dir,
                                                              const std::string& split);
// The embedder without noise (σ 0) the clean hypotheses are embedded with.
std::shared_ptr<NoisyEmbedder> clean_hypothesis_embedder(const Config& cfg);

}  // namespace daei
