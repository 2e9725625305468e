#include "eval/reference.h"

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "data/cache.h"
#include "data/run_layout.h"
#include "eval/clean_cache.h"
#include "model/release/embedder.h"

namespace daei {

namespace {
std::shared_ptr<CleanCache> open_clean_split(const std::string& run_dir, const std::string& split) {
  return std::shared_ptr<CleanCache>(
      CleanCache::open(RunLayout(run_dir).cache(split), CleanCache::OfflineEvalOnly{}));
}
}  // namespace

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
  auto clean = open_clean_split(run_dir, split);
  InverterTrainData d;
  d.rows = clean->size();
  d.dim = clean->dim();
  d.input = "clean";
  d.embeddings = [clean](const std::vector<int64_t>& rows) { return clean->clean(rows); };
  d.texts = [clean](const std::vector<int64_t>& rows) { return clean->texts(rows); };
  return d;
}

void require_clean_corrector_reference(const Config& cfg, const std::string& run_dir) {
  DAEI_CHECK(cfg.flag("reference.corrector"),
             "clean-corrector is a reference outside the threat model (clean targets and clean hypothesis embeddings); "
             "set reference.corrector: true (with reference.enabled: true) to train it");
  require_clean_train_reference(cfg, run_dir);
}

namespace {
// A clean cache through the NoisyDataset interface: noisy() returns the clean rows. Its σ is the release's (the
// corrector loads no DAE, so nothing calls a DAE at it).
class CleanRowsDataset final : public NoisyDataset {
 public:
  explicit CleanRowsDataset(std::shared_ptr<CleanCache> c) : c_(std::move(c)) {}
  int64_t size() const override { return c_->size(); }
  int64_t dim() const override { return c_->dim(); }
  double sigma() const override { return c_->sigma(); }
  at::Tensor noisy(const std::vector<int64_t>& idx) const override { return c_->clean(idx); }
  std::vector<std::string> texts(const std::vector<int64_t>& idx) const override { return c_->texts(idx); }

 private:
  std::shared_ptr<CleanCache> c_;
};
}  // namespace

std::shared_ptr<const NoisyDataset> clean_rows_as_dataset(const Config& cfg, const std::string& run_dir,
                                                          const std::string& split) {
  require_clean_corrector_reference(cfg, run_dir);
  return std::make_shared<CleanRowsDataset>(open_clean_split(run_dir, split));
}

std::function<at::Tensor(int64_t, int64_t)> clean_rows_reader(const Config& cfg, const std::string& run_dir,
                                                              const std::string& split) {
  require_clean_corrector_reference(cfg, run_dir);
  auto clean = open_clean_split(run_dir, split);
  return [clean](int64_t begin, int64_t end) {
    std::vector<int64_t> rows(end - begin);
    for (int64_t i = 0; i < end - begin; ++i) rows[i] = begin + i;
    return clean->clean(rows);
  };
}

std::shared_ptr<NoisyEmbedder> clean_hypothesis_embedder(const Config& cfg) {
  return std::make_shared<NoisyEmbedder>(make_reference_embedder(cfg), 0.0, 0);
}

}  // namespace daei
