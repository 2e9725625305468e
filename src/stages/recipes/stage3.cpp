// Stage 3, paper §III-C: the DAE and the inverter fine-tuned together, PCGrad on the DAE (what and why: stage3.h).
#include "stages/recipes/stage3.h"

#include <torch/torch.h>

#include <filesystem>

#include "core/config.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/log.h"
#include "dist/communicator.h"
#include "model/net/generate.h"
#include "stages/loop/best_checkpoint.h"
#include "stages/loop/heldout.h"
#include "stages/recipes/pcgrad.h"
#include "stages/recipes/stage1.h"
#include "stages/recipes/shared_options.h"
#include "stages/recipes/stage2.h"
#include "stages/loop/trainer.h"

namespace daei {

namespace {
constexpr uint64_t kTagCeDropout = 64;  // the DAE's dropout in the CE pass (the SURE pass uses stage 1's tags)
}

Stage3Options Stage3Options::from_config(const Config& cfg) {
  Stage3Options o;
  fields(o, config_reader(cfg, "stage3"));
  DAEI_CHECK(o.pcgrad == "per_tensor" || o.pcgrad == "whole" || o.pcgrad == "off",
             "stage3.pcgrad must be per_tensor, whole or off, got '{}'", o.pcgrad);
  return o;
}

Stage3::Stage3(const Config& cfg, Communicator& comm, const std::string& stage_dir,
               std::shared_ptr<const NoisyDataset> train, std::shared_ptr<SpmTokenizer> tok, const std::string& dae_dir,
               const std::string& inverter_dir, bool resume, bool force)
    : train_(std::move(train)), tok_(std::move(tok)), stage_dir_(stage_dir) {
  const auto options = Stage3Options::from_config(cfg);
  seed_ = attack_seed(cfg);  // stage 1's streams: with λ = 0 a step is a stage-1 step
  dae_ = Dae::load_for(dae_dir, train_->sigma());
  inverter_ = Inverter(InverterImpl::load(inverter_dir));
  const at::Device device = train_device(cfg, comm.local_rank());
  dae_->to(device);
  inverter_->to(device);
  dae_->train();
  inverter_->train();
  sure_ = Stage1Options::from_config(cfg).sure;
  sched_.mode = "fixed";  // DAEI's stage 3 default: σ₀ throughout
  sched_.sigma0 = dae_->sigma0();
  sched_.sigma_max = dae_->sigma0();
  max_len_ = InverterOptions::from_config(cfg).max_length_train;
  select_decoding_ = eval_decoding(cfg);  // the selection scores recoveries as the evaluation's rows decode them
  lambda_warmup_ = options.lambda_warmup_steps;
  lambda_max_ = options.lambda_max;
  whole_ = options.pcgrad == "whole";

  auto opt = trainer_options(cfg, "stage3", stage_dir);
  opt.resume = resume;
  opt.force = force;
  std::vector<ParamGroupSpec> groups{
      {"inverter", inverter_->parameters(), options.lr_inverter, options.weight_decay, 0.0},
      {"dae", dae_->parameters(), options.lr_dae, options.weight_decay, options.dae_clip_norm}};
  trainer_ = std::make_unique<Trainer>(comm, opt, train_->size(),
                                       ModuleList{{"dae.", dae_.ptr()}, {"inverter.", inverter_.ptr()}}, groups,
                                       std::vector<std::string>{"sure", "ce"});
  trainer_->terms = {"loss", "sure", "ce", "lambda", "tokens", "pcgrad_conflict_frac", "pcgrad_cos"};
  trainer_->prefetch = [this](const std::vector<int64_t>& rows) { train_->prefetch(rows, true); };
  trainer_->loss = [this, device](const Batch& b) {
    // Phase 1: SURE on the DAE (the second-order graph stays inside the DAE).
    auto st = sure_step(dae_, *train_, b, seed_, sched_, sure_);
    // Phase 2: a fresh first-order pass DAE(y, σ₀) → inverter → CE, scaled by λ(t).
    const double lambda = lambda_schedule(b.step, lambda_warmup_, lambda_max_);
    LossOutput out;
    out.loss = st.loss;
    out.terms = {{"sure", st.terms.at("loss")}, {"lambda", lambda}};
    const auto texts = train_->texts(b.rows);
    auto labels = labels_from_rows(token_rows(*tok_, texts, max_len_)).to(device);
    const double count = static_cast<double>((labels != -100).sum().item<int64_t>());
    if (lambda > 0) {
      dae_->set_power_iteration(false);  // u, v advanced once per step, in the SURE pass
      auto masks = dae_dropout_masks(dae_, b, seed_, kTagCeDropout);
      for (auto& m : masks) m = m.to(device);
      auto y = train_->noisy(b.rows).to(device);
      auto e = dae_->forward(y, torch::full({y.size(0)}, sched_.sigma0, y.options()), masks);
      auto tl = inverter_->loss(e, labels);
      out.more.push_back({tl.sum * lambda, count});
      const double ce = tl.sum.item<double>() / std::max(1.0, count);
      out.terms["ce"] = ce;
      out.terms["loss"] = st.terms.at("loss") + lambda * ce;
    } else {
      out.more.push_back({torch::zeros({}, torch::TensorOptions().device(device)), count});  // nothing to differentiate
      out.terms["loss"] = st.terms.at("loss");
    }
    out.terms["tokens"] = count;
    return out;
  };
  // PCGrad on the global gradients: the DAE gets g_SURE + projected g_CE, the inverter g_CE.
  const size_t n_inv = inverter_->parameters().size();
  trainer_->combine = [this, n_inv, proj = options.pcgrad](GradSets& sets) {
    return combine_sure_ce(sets, trainer_->params(), n_inv, proj);
  };
  trainer_->save_final = [this](const std::string& dir) {
    if (best_ && best_->has()) {  // selection: the final models are the best held-out ones, copied whole
      for (const char* m : {"dae", "inverter"})
        std::filesystem::copy(best_->dir() + "/" + m, dir + "/" + m, std::filesystem::copy_options::recursive);
      LOG_INFO("[stage3] final models = step {} (held-out BLEU {:.4f}), selected", best_->step(), best_->score());
      return;
    }
    dae_->save(dir + "/dae");
    inverter_->save(dir + "/inverter");
  };
}

Stage3::~Stage3() = default;

void Stage3::enable_heldout(const Config& cfg, Communicator& comm, std::shared_ptr<const NoisyDataset> val) {
  if (trainer_->options().eval_every <= 0 || !val || val->size() == 0) {
    DAEI_CHECK(!select_, "stage3.select_by heldout_bleu needs stage3.eval_every > 0 and a non-empty val split");
    return;
  }
  val_ = std::move(val);
  const int64_t rows = std::min(HeldoutOptions::from_config(cfg).rows, val_->size());
  const int64_t batch = trainer_->options().global_batch;
  trainer_->evaluate = [this, rows, batch, &comm](int64_t step) {
    const at::Device device = inverter_->t5->shared->weight.device();
    const bool dae_training = dae_->is_training();
    dae_->eval();
    HeldOutLoss f = [&](const std::vector<int64_t>& r) {
      auto y = val_->noisy(r).to(device);
      auto e = dae_->forward(y, torch::full({y.size(0)}, sched_.sigma0, y.options()));
      return inverter_->loss(e, labels_from_rows(token_rows(*tok_, val_->texts(r), max_len_)).to(device));
    };
    std::map<std::string, double> ev{{"heldout_ce", heldout_ce(comm, rows, batch, *inverter_, f)}};
    if (select_) {
      HeldOutScores score = [&](const std::vector<int64_t>& r) {
        auto y = val_->noisy(r).to(device);
        auto e = dae_->forward(y, torch::full({y.size(0)}, sched_.sigma0, y.options()));
        const auto hyps = tok_->decode_batch(inverter_->generate(e, select_decoding_).cpu());
        const auto refs = val_->texts(r);
        std::vector<double> out;
        for (size_t i = 0; i < hyps.size(); ++i) out.push_back(select_(hyps[i], refs[i]));
        return out;
      };
      const double bleu = heldout_mean(comm, rows, batch, *inverter_, score);
      ev["heldout_bleu"] = bleu;
      if (comm.is_root())
        best_->offer(step, bleu, [this](const std::string& dir) {
          dae_->save(dir + "/dae");
          inverter_->save(dir + "/inverter");
        });
    }
    if (dae_training) dae_->train();
    return ev;
  };
}

void Stage3::select_by(PairScore score) {
  DAEI_CHECK(!trainer_->evaluate, "stage 3: select_by must come before enable_heldout");
  select_ = std::move(score);
  best_ = std::make_unique<BestKeeper>(stage_dir_);
}

int Stage3::run() {
  LOG_INFO("[stage3] joint fine-tune: PCGrad {}, λ → {} over {} steps, σ₀ {}, {} rows",
           whole_ ? "whole-DAE" : "per tensor", lambda_max_, lambda_warmup_, sched_.sigma0, train_->size());
  return trainer_->run();
}

}  // namespace daei
