// Stage 1, paper §III-A: the SURE-trained DAE (what and why: stage1.h).
#include "stages/recipes/stage1.h"

#include <torch/torch.h>

#include <cmath>

#include "core/config.h"
#include "core/fields.h"
#include "core/error.h"
#include "core/log.h"
#include "dist/communicator.h"
#include "stages/loop/trainer.h"

namespace daei {
namespace {
// Stream tags of the per-step generators (step_generator(seed, step, tag)).
enum : uint64_t { kTagSigma = 1, kTagNoise = 2, kTagProbes = 3, kTagDropout = 16 };
}  // namespace

DaeOptions dae_options(const Config& cfg, int64_t dim) {
  DaeOptions o;
  read_config_fields(o, cfg, "dae");
  o.dim = dim;  // from the data, not the config
  return o;
}

Stage1Options Stage1Options::from_config(const Config& cfg) {
  Stage1Options o;
  fields(o, config_reader(cfg, "stage1"));
  SureOptions::fields(o.sure, config_reader(cfg, "stage1.sure"));
  SigmaOptions::fields(o.sigma, config_reader(cfg, "stage1.sigma"));
  return o;
}

std::vector<at::Tensor> dae_dropout_masks(Dae& dae, const Batch& b, uint64_t seed, uint64_t tag) {
  std::vector<at::Tensor> masks;
  const double p = dae->options().dropout;
  if (p <= 0) return masks;
  const int64_t n = static_cast<int64_t>(b.rows.size());
  for (int64_t i = 0; i < dae->options().depth; ++i) {
    auto gd = step_generator(seed, b.step, tag + static_cast<uint64_t>(i));
    masks.push_back((torch::rand({b.global_batch, dae->mask_width()}, gd).narrow(0, b.global_offset, n) >= p)
                        .to(torch::kFloat32) /
                    (1.0 - p));
  }
  return masks;
}

SureStep sure_step(Dae& dae, const NoisyDataset& data, const Batch& b, uint64_t seed, const SigmaSchedule& sched,
                   const SureOptions& sure) {
  const int64_t B = b.global_batch, n = static_cast<int64_t>(b.rows.size()), off = b.global_offset, d = data.dim();
  auto gs = step_generator(seed, b.step, kTagSigma);
  const double u = torch::rand({1}, gs, torch::kFloat64).item<double>();
  const double sigma = sched.draw(b.step, u);
  auto y = data.noisy(b.rows);
  if (sigma > sched.sigma0 * (1 + 1e-12)) {
    auto gn = step_generator(seed, b.step, kTagNoise);
    const double extra = std::sqrt(sigma * sigma - sched.sigma0 * sched.sigma0);
    y = y + extra * torch::randn({B, d}, gn).narrow(0, off, n);
  }
  auto gp = step_generator(seed, b.step, kTagProbes);
  auto probes = rademacher({sure.probes, B, d}, gp).narrow(1, off, n);
  auto masks = dae_dropout_masks(dae, b, seed, kTagDropout);
  dae->set_power_iteration(b.micro == 0);  // once per optimizer step, whatever the accumulation
  const auto dev = dae->parameters().front().device();
  auto t = sure_loss(dae, y.to(dev), torch::full({n}, sigma, torch::TensorOptions().device(dev)), probes.to(dev),
                     [&] {
                       for (auto& m : masks) m = m.to(dev);
                       return masks;
                     }(),
                     sure);
  SureStep out;
  out.loss = t.loss;
  out.sigma = sigma;
  const double dsig2 = static_cast<double>(d) * sigma * sigma;
  const double l = t.loss.item<double>();
  out.terms = {{"loss", l},
               {"sure_sq", t.sq.item<double>()},
               {"sure_div", t.div.item<double>()},
               {"sigma", sigma},
               {"mse_reduction_est", 1.0 - (l + dsig2) / dsig2}};
  return out;
}

Stage1::Stage1(const Config& cfg, Communicator& comm, const std::string& stage_dir,
               std::shared_ptr<const NoisyDataset> train, std::shared_ptr<const NoisyDataset> val, bool resume, bool force)
    : comm_(comm), stage_dir_(stage_dir), train_(std::move(train)), val_(std::move(val)) {
  const auto options = Stage1Options::from_config(cfg);
  auto opt = trainer_options(cfg, "stage1", stage_dir);
  opt.resume = resume;
  opt.force = force;
  seed_ = attack_seed(cfg);
  torch::manual_seed(seed_);  // identical initial weights on every rank (rank 0's are broadcast anyway)
  dae_ = Dae(dae_options(cfg, train_->dim()));
  dae_->train();
  sure_ = options.sure;
  sched_.mode = options.sigma.mode;
  // σ₀ is the training data's σ (a remote release's σ̂); stage1.sigma.assumed overrides it to measure how the DAE
  // depends on a misestimated σ (the DAE then records that σ₀ and later stages refuse it against this cache).
  const double assumed = options.sigma.assumed;
  sched_.sigma0 = assumed > 0 ? assumed : train_->sigma();
  if (assumed > 0 && comm.is_root())
    LOG_WARN("[stage1] SURE assumes σ₀ = {} (stage1.sigma.assumed), the data is at σ {}", assumed, train_->sigma());
  sched_.sigma_max = options.sigma.max_factor * sched_.sigma0;
  sched_.decay_fraction = options.sigma.decay_fraction;
  sched_.total_steps = opt.total_steps;
  DAEI_CHECK(sched_.sigma0 > 0, "stage 1: the training data's noise level σ₀ is {}; SURE needs σ₀ > 0", sched_.sigma0);
  DAEI_CHECK(sched_.sigma_max >= sched_.sigma0, "stage1.sigma.max_factor must be ≥ 1");
  dae_->set_sigma0(sched_.sigma0);
  eval_rows_ = options.eval_rows;

  ParamGroupSpec g{"dae", dae_->parameters(), options.lr, options.weight_decay, 0.0};
  trainer_ = std::make_unique<Trainer>(comm, opt, train_->size(), ModuleList{{"", dae_.ptr()}}, std::vector{g});

  trainer_->prefetch = [this](const std::vector<int64_t>& rows) { train_->prefetch(rows, false); };
  trainer_->loss = [this](const Batch& b) {
    auto st = sure_step(dae_, *train_, b, seed_, sched_, sure_);
    LossOutput out;
    out.loss = st.loss;
    out.terms = st.terms;
    return out;
  };
  trainer_->terms = {"loss", "sure_sq", "sure_div", "sigma", "mse_reduction_est"};
  trainer_->save_extra = [this](const std::string& dir) { dae_->save_config(dir); };
  trainer_->save_final = [this](const std::string& dir) { dae_->save(dir + "/dae"); };
  if (val_ && opt.eval_every > 0) trainer_->evaluate = [this](int64_t) { return evaluate(*val_); };
}

Stage1::~Stage1() = default;

std::map<std::string, double> Stage1::evaluate(const NoisyDataset& data) {
  const bool was_training = dae_->is_training();
  dae_->eval();
  const int64_t n = std::min<int64_t>(data.size(), eval_rows_ > 0 ? eval_rows_ : data.size());
  const int64_t lb = 256;
  // Rows 0..n-1 split over ranks; padding (-1) skipped; sums all-reduced.
  std::vector<int64_t> mine;
  for (int64_t i = comm_.rank(); i < n; i += comm_.size()) mine.push_back(i);
  double sum = 0;
  const double s0 = sched_.sigma0;  // the σ the attack assumes (σ of the data unless stage1.sigma.assumed)
  for (size_t i = 0; i < mine.size(); i += lb) {
    std::vector<int64_t> rows(mine.begin() + i, mine.begin() + std::min(mine.size(), i + lb));
    const int64_t m = static_cast<int64_t>(rows.size());
    // One probe stream per row (keyed by the row index): the estimate does not depend on the world size.
    std::vector<at::Tensor> per_row;
    for (int64_t r : rows) {
      auto gp = step_generator(seed_ ^ 0xE7A1ULL, r, kTagProbes);
      per_row.push_back(rademacher({sure_.probes, 1, data.dim()}, gp));
    }
    auto t = sure_loss(dae_, data.noisy(rows), torch::full({m}, s0), torch::cat(per_row, 1), {}, sure_);
    sum += t.loss.item<double>() * m;
  }
  sum = comm_.allreduce(sum, ReduceOp::Sum);
  if (was_training) dae_->train();
  const double dsig2 = static_cast<double>(data.dim()) * s0 * s0;
  const double mse = sum / std::max<int64_t>(1, n) + dsig2;  // SURE: E‖h(y) − x‖² = E[L] + dσ²
  return {{"sure_mse", mse}, {"noisy_mse", dsig2}, {"mse_reduction_est", 1.0 - mse / dsig2}};
}

int Stage1::run() {
  LOG_INFO("[stage1] DAE d {} H {} depth {} ({} parameters), {} rows, σ₀ {}, σ {} (max {}), divergence {} K {}",
           dae_->options().dim, dae_->options().hidden, dae_->options().depth,
           [&] {
             int64_t c = 0;
             for (auto& p : dae_->parameters()) c += p.numel();
             return c;
           }(),
           train_->size(), sched_.sigma0, sched_.mode, sched_.sigma_max, sure_.divergence, sure_.probes);
  return trainer_->run();
}

}  // namespace daei
