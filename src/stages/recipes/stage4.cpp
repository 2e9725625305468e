// Stage 4, paper §III-D: the corrector behind the frozen DAE shield (what and why: stage4.h).
#include "stages/recipes/stage4.h"

#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/log.h"
#include "core/rng.h"
#include "dist/communicator.h"
#include "model/attack/corrector.h"
#include "model/attack/dae.h"
#include "model/net/t5_pretrained.h"
#include "model/text/token_batch.h"
#include "stages/loop/heldout.h"
#include "stages/recipes/shared_options.h"
#include "stages/recipes/stage2.h"
#include "stages/loop/trainer.h"

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

void check_aligned(const std::string& tag, const NoisyDataset& targets, const NoisyDataset& hyps, const char* what) {
  DAEI_CHECK(hyps.size() <= targets.size() && hyps.size() > 0, "[{}] {} hypotheses for {} {} rows (rebuild them with "
             "`daei hypotheses`)", tag, hyps.size(), targets.size(), what);
  DAEI_CHECK(hyps.dim() == targets.dim(), "[{}] hypothesis embeddings have dimension {}, the targets {}", tag,
             hyps.dim(), targets.dim());
}
}  // namespace

Stage4Options Stage4Options::from_config(const Config& cfg) {
  Stage4Options o;
  fields(o, config_reader(cfg, "stage4"));
  return o;
}

Stage4::Stage4(const Config& cfg, Communicator& comm, const CorrectorChain& chain, const std::string& stage_dir,
               CorrectorStageData data, std::shared_ptr<SpmTokenizer> tok, bool resume, bool force)
    : chain_(chain), data_(std::move(data)), tok_(std::move(tok)) {
  const auto options = Stage4Options::from_config(cfg);
  const auto inverter_options = InverterOptions::from_config(cfg);
  const int64_t heldout_rows = HeldoutOptions::from_config(cfg).rows;
  const std::string& tag = chain_.folder;
  check_aligned(tag, *data_.train, *data_.hyps, "training");
  if (data_.hyps->size() < data_.train->size())
    data_.train = std::make_shared<PrefixDataset>(data_.train, data_.hyps->size());
  const at::Device device = train_device(cfg, comm.local_rank());
  if (!data_.dae_dir.empty()) {
    dae_ = Dae::load_for(data_.dae_dir, data_.train->sigma());  // frozen: the DAE shield
    dae_->to(device);
    dae_->eval();
    for (auto& p : dae_->parameters()) p.set_requires_grad(false);
  }
  torch::manual_seed(splitmix64(attack_seed(cfg) ^ 0xC0AAEC7ULL));
  CorrectorConfig cc;
  cc.dim = data_.train->dim();
  cc.repeat = inverter_options.repeat_tokens;
  cc.t5 = inverter_config(cfg, data_.train->dim(), tok_->vocab_size()).t5;
  corrector_ = std::make_shared<CorrectorImpl>(cc);
  if (options.warm_start) {
    auto inverter = InverterImpl::load(data_.inverter_dir);
    const std::string& heads = options.warm_start_t2_t3;
    DAEI_CHECK(heads == "copy" || heads == "fresh", "stage4.warm_start_t2_t3 must be copy or fresh, got '{}'", heads);
    const auto copied = warm_start_corrector(*corrector_, *inverter, heads == "copy");
    LOG_INFO("[{}] warm start: {} tensors from {} (T5, T1{})", tag, copied.size(), data_.inverter_dir,
             heads == "copy" ? ", T2 and T3 as copies of T1" : "; T2, T3 fresh");
  } else if (!data_.pretrained_dir.empty()) {
    const auto r = load_pretrained_t5(*corrector_->t5, data_.pretrained_dir);
    LOG_INFO("[{}] T5 starts from the pretrained {} ({} tensors copied, {} cut to the tokenizer's pieces)", tag,
             data_.pretrained_dir, r.copied.size(), r.cut.size());
  } else if (!inverter_options.t5_dir.empty()) {
    corrector_->t5->load_weights(inverter_options.t5_dir + "/model.safetensors");
  }
  corrector_->to(device);
  corrector_->train();
  max_len_ = inverter_options.max_length_train;
  hyp_len_ = inverter_options.max_length_eval;
  auto opt = trainer_options(cfg, "stage4", stage_dir);
  opt.tag = tag;
  opt.resume = resume;
  opt.force = force;
  ParamGroupSpec g{"corrector", corrector_->parameters(), options.lr, options.weight_decay, 0.0};
  trainer_ = std::make_unique<Trainer>(comm, opt, data_.train->size(), ModuleList{{"", corrector_}}, std::vector{g});
  trainer_->terms = {"loss", "tokens", "hyp_cos"};
  trainer_->prefetch = [this](const std::vector<int64_t>& rows) {
    data_.train->prefetch(rows, true);
    data_.hyps->prefetch(rows, true);
  };
  // The loss of rows of (targets, hypotheses): the training batches and the held-out rows alike.
  auto batch_loss = [this, device](const NoisyDataset& targets, const NoisyDataset& hyps,
                                   const std::vector<int64_t>& rows, double* hyp_cos) {
    at::Tensor target, hyp_e;
    {
      torch::NoGradGuard ng;
      target = shield(targets.noisy(rows).to(device));
      hyp_e = shield(hyps.noisy(rows).to(device));
      if (hyp_cos) *hyp_cos = torch::cosine_similarity(target, hyp_e, 1).mean().item<double>();
    }
    auto hyp_ids = pad_token_rows(token_rows(*tok_, hyps.texts(rows), hyp_len_), 0, 1).input_ids.to(device);
    auto labels = labels_from_rows(token_rows(*tok_, targets.texts(rows), max_len_)).to(device);
    return corrector_->loss(target, hyp_e, hyp_ids, labels);
  };
  trainer_->loss = [this, batch_loss](const Batch& b) {
    double hyp_cos = 0;
    auto tl = batch_loss(*data_.train, *data_.hyps, b.rows, &hyp_cos);
    return token_sum_loss(tl.sum, tl.count, {{"hyp_cos", hyp_cos}});
  };
  if (data_.val && data_.hyps_val && opt.eval_every > 0) {
    check_aligned(tag, *data_.val, *data_.hyps_val, "validation");
    const int64_t rows = std::min(heldout_rows, data_.hyps_val->size());
    const int64_t batch = opt.global_batch;  // stage4.batch_size
    trainer_->evaluate = [this, rows, batch, batch_loss, &comm](int64_t) {
      HeldOutLoss f = [&](const std::vector<int64_t>& r) { return batch_loss(*data_.val, *data_.hyps_val, r, nullptr); };
      return std::map<std::string, double>{{"heldout_ce", heldout_ce(comm, rows, batch, *corrector_, f)}};
    };
  }
  trainer_->save_final = [this](const std::string& dir) { corrector_->save(dir + "/corrector"); };
}

Stage4::~Stage4() = default;

at::Tensor Stage4::shield(const at::Tensor& y) {
  if (!dae_) return y;
  return dae_->forward(y, torch::full({y.size(0)}, dae_->sigma0(), y.options()));
}

int Stage4::run() {
  int64_t n = 0;
  for (const auto& p : corrector_->parameters()) n += p.numel();
  if (dae_)
    LOG_INFO("[{}] corrector ({}): {} parameters behind the frozen DAE of {} (σ₀ {}), {} rows", chain_.folder,
             chain_.system, n, chain_.dae_stage, dae_->sigma0(), data_.train->size());
  else
    LOG_INFO("[{}] corrector ({}): {} parameters, no DAE (targets y, hypotheses f̃(x̂)), {} rows", chain_.folder,
             chain_.system, n, data_.train->size());
  return trainer_->run();
}

}  // namespace daei
