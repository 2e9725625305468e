#include "stages/stage4.h"

#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "dist/communicator.h"
#include "model/corrector.h"
#include "model/token_batch.h"
#include "stages/stage1.h"
#include "stages/stage2.h"
#include "stages/trainer.h"

namespace daei {

namespace {
// The first n rows of a dataset (the hypothesis cache may cover a prefix of the training rows only).
class PrefixDataset final : public NoisyDataset {
 public:
  PrefixDataset(std::shared_ptr<const NoisyDataset> d, int64_t n) : d_(std::move(d)), n_(n) {}
  int64_t size() const override { return n_; }
  int64_t dim() const override { return d_->dim(); }
  double sigma() const override { return d_->sigma(); }
  at::Tensor noisy(const std::vector<int64_t>& idx) const override { return d_->noisy(idx); }
  std::vector<std::string> texts(const std::vector<int64_t>& idx) const override { return d_->texts(idx); }
  void prefetch(const std::vector<int64_t>& idx, bool with_texts) const override { d_->prefetch(idx, with_texts); }

 private:
  std::shared_ptr<const NoisyDataset> d_;
  int64_t n_;
};
}  // namespace

Stage4::Stage4(const Config& cfg, Communicator& comm, const std::string& stage_dir,
               std::shared_ptr<const NoisyDataset> train, std::shared_ptr<const NoisyDataset> hyps,
               std::shared_ptr<SpmTokenizer> tok, const std::string& dae_dir, bool resume, bool force)
    : train_(std::move(train)), hyps_(std::move(hyps)), tok_(std::move(tok)) {
  DAEI_CHECK(hyps_->size() <= train_->size() && hyps_->size() > 0,
             "stage 4: {} hypotheses for {} training rows (rebuild cache/hyp-train)", hyps_->size(), train_->size());
  if (hyps_->size() < train_->size()) train_ = std::make_shared<PrefixDataset>(train_, hyps_->size());
  DAEI_CHECK(hyps_->dim() == train_->dim(), "stage 4: hypothesis embeddings have dimension {}, the targets {}",
             hyps_->dim(), train_->dim());
  dae_ = load_dae_for(dae_dir, *train_, &sigma0_);  // frozen: the DAE shield
  const at::Device device = train_device(cfg, comm.local_rank());
  dae_->to(device);
  dae_->eval();
  for (auto& p : dae_->parameters()) p.set_requires_grad(false);
  torch::manual_seed(splitmix64(static_cast<uint64_t>(cfg.integer("run.seed")) ^ 0xC0AAEC7ULL));
  CorrectorConfig cc;
  cc.dim = train_->dim();
  cc.repeat = cfg.integer("inverter.repeat_tokens");
  cc.t5 = inverter_config(cfg, train_->dim(), tok_->vocab_size()).t5;
  corrector_ = std::make_shared<CorrectorImpl>(cc);
  const std::string t5_dir = cfg.str("inverter.t5_dir");
  if (!t5_dir.empty()) corrector_->t5->load_weights(t5_dir + "/model.safetensors");
  corrector_->to(device);
  corrector_->train();
  max_len_ = cfg.integer("inverter.max_length_train");
  hyp_len_ = cfg.integer("inverter.max_length_eval");
  auto opt = trainer_options(cfg, "stage4", stage_dir);
  opt.resume = resume;
  opt.force = force;
  ParamGroupSpec g{"corrector", corrector_->parameters(), cfg.real("stage4.lr"), cfg.real("stage4.weight_decay"), 0.0};
  trainer_ = std::make_unique<Trainer>(comm, opt, train_->size(), ModuleList{{"", corrector_}}, std::vector{g});
  trainer_->terms = {"loss", "tokens", "hyp_cos"};
  trainer_->prefetch = [this](const std::vector<int64_t>& rows) {
    train_->prefetch(rows, true);
    hyps_->prefetch(rows, true);
  };
  trainer_->loss = [this, device](const Batch& b) {
    at::Tensor target, hyp_e;
    {
      torch::NoGradGuard ng;
      auto y = train_->noisy(b.rows).to(device), yh = hyps_->noisy(b.rows).to(device);
      target = dae_->forward(y, torch::full({y.size(0)}, sigma0_, y.options()));
      hyp_e = dae_->forward(yh, torch::full({yh.size(0)}, sigma0_, yh.options()));
    }
    auto hyp_ids = pad_token_rows(token_rows(*tok_, hyps_->texts(b.rows), hyp_len_), 0, 1).input_ids.to(device);
    auto labels = labels_from_rows(token_rows(*tok_, train_->texts(b.rows), max_len_)).to(device);
    auto tl = corrector_->loss(target, hyp_e, hyp_ids, labels);
    LossOutput out;
    out.loss = tl.sum;
    out.count = static_cast<double>(tl.count);
    out.terms = {{"loss", tl.sum.item<double>() / std::max<int64_t>(1, tl.count)},
                 {"tokens", static_cast<double>(tl.count)},
                 {"hyp_cos", torch::cosine_similarity(target, hyp_e, 1).mean().item<double>()}};
    return out;
  };
  trainer_->save_final = [this](const std::string& dir) { corrector_->save(dir + "/corrector"); };
}

Stage4::~Stage4() = default;

int Stage4::run() {
  int64_t n = 0;
  for (const auto& p : corrector_->parameters()) n += p.numel();
  LOG_INFO("[stage4] corrector: {} parameters behind the frozen stage-3 DAE (σ₀ {}), {} rows", n, sigma0_,
           train_->size());
  return trainer_->run();
}

}  // namespace daei
