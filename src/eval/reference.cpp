#include "eval/reference.h"

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "data/cache.h"
#include "data/run_layout.h"
#include "eval/clean_cache.h"

namespace daei {

void require_clean_train_reference(const Config& cfg, const std::string& run_dir) {
  DAEI_CHECK(cfg.flag("reference.enabled"),
             "clean-inverter is a reference outside the threat model (it reads clean training embeddings); set "
             "reference.enabled: true to train it");
  const std::string dir = RunLayout(run_dir).cache("train");
  DAEI_CHECK(RunLayout(run_dir).clean_cache_complete("train"),
             "{}/clean: no clean training cache; build it with `daei cache build --split train --clean --set "
             "cache.clean_train_reference=true`",
             dir);
}

InverterTrainData clean_train_data(const Config& cfg, const std::string& run_dir) {
  return clean_split_data(cfg, run_dir, "train");
}

InverterTrainData clean_split_data(const Config& cfg, const std::string& run_dir, const std::string& split) {
  require_clean_train_reference(cfg, run_dir);
  std::shared_ptr<CleanCache> clean(CleanCache::open(RunLayout(run_dir).cache(split), CleanCache::OfflineEvalOnly{}));
  InverterTrainData d;
  d.rows = clean->size();
  d.dim = clean->dim();
  d.input = "clean";
  d.embeddings = [clean](const std::vector<int64_t>& rows) { return clean->clean(rows); };
  d.texts = [clean](const std::vector<int64_t>& rows) { return clean->texts(rows); };
  return d;
}

}  // namespace daei
