// Stage 1: SURE is unbiased, Hutchinson's divergence matches the Jacobian trace, spectral norm holds σ_max ≈ 1,
// the Trainer resumes bitwise on one rank, SIGUSR1 gives exit 75 and a DONE checkpoint, the DAE table's filters.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <csignal>
#include <filesystem>

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/safetensors.h"
#include "core/signals.h"
#include "data/run_layout.h"
#include "dist/communicator.h"
#include "eval/dae_table.h"
#include "stages/loop/data_source.h"
#include "stages/recipes/stage1.h"
#include "stages/recipes/stage2.h"
#include "stages/recipes/wiener.h"
#include "stages/recipes/sure.h"
#include "stages/loop/trainer.h"
#include "../support/temp_dir.h"
#include "../support/test_seed.h"

using namespace daei;
namespace fs = std::filesystem;

namespace {

Dae small_dae(int64_t d, int64_t h, uint64_t seed) {
  torch::manual_seed(test::seed(seed));
  DaeOptions o;
  o.dim = d, o.hidden = h, o.depth = 2, o.dropout = 0.0;
  Dae dae(o);
  torch::NoGradGuard ng;
  for (auto& p : dae->named_parameters())
    if (p.key().rfind("output_proj", 0) == 0) p.value().normal_(0.0, 0.05);  // not the identity
  dae->train();
  for (int i = 0; i < 30; ++i) dae->residual(torch::randn({4, d}), torch::full({4}, 0.1));  // converge u, v
  dae->eval();
  return dae;
}

std::string temp_dir(const std::string& name) {
  auto p = fs::temp_directory_path() / fmt::format("daei-test-{}-{}", name, ::getpid());
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

Config stage1_config(int64_t steps) {
  auto cfg = Config::defaults();
  for (const char* s : {"dae.hidden=32", "dae.depth=2", "stage1.batch_size=12", "stage1.warmup_steps=2",
                        "stage1.eval_every=0", "train.log_every=2", "train.ckpt_every=3", "train.progress_every_s=100.0"})
    cfg.set(s, "test");
  cfg.set(fmt::format("stage1.steps={}", steps), "test");
  return cfg;
}

std::shared_ptr<const NoisyDataset> synthetic_train(int64_t n = 120) {
  auto s = synthetic_split(n, 16, 0.04, 7, "train");
  return std::make_shared<InMemoryDataset>(s.noisy, std::vector<std::string>{}, 0.04);
}

}  // namespace

TEST(Sure, UnbiasedForAFixedDenoiser) {
  const int64_t d = 8, B = 500, batches = 60;
  const double sigma = 0.3;
  auto dae = small_dae(d, 16, 3);
  auto A = torch::randn({d, d}) * 0.5;
  for (const std::string div : {"hutchinson", "fd"}) {
    SureOptions opt;
    opt.divergence = div;
    opt.probes = 3;
    std::vector<double> diffs;
    for (int64_t b = 0; b < batches; ++b) {
      auto x = torch::matmul(torch::randn({B, d}), A) + 0.2;
      auto y = x + sigma * torch::randn({B, d});
      auto s = torch::full({B}, sigma);
      auto t = sure_loss(dae, y, s, torch::randint(0, 2, {opt.probes, B, d}).to(torch::kFloat32) * 2 - 1, {}, opt);
      torch::NoGradGuard ng;
      const double true_mse = (dae->forward(y, s) - x).pow(2).sum(1).mean().item<double>();
      diffs.push_back(t.loss.item<double>() + d * sigma * sigma - true_mse);
    }
    auto dt = torch::tensor(diffs, torch::kFloat64);
    const double mean = dt.mean().item<double>(), se = dt.std().item<double>() / std::sqrt(double(batches));
    EXPECT_LT(std::abs(mean), 4 * se + (div == "fd" ? 1e-3 : 0.0)) << div << ": SURE − MSE = " << mean << " ± " << se;
  }
}

TEST(Sure, HutchinsonMatchesJacobianTrace) {
  const int64_t d = 8;
  auto dae = small_dae(d, 16, 5);
  auto y = torch::randn({1, d});
  auto s = torch::full({1}, 0.2);
  // Exact trace of J_r by d VJPs with unit vectors.
  auto yg = y.clone().requires_grad_(true);
  auto r = dae->residual(yg, s);
  double trace = 0;
  for (int64_t i = 0; i < d; ++i) {
    auto e = torch::zeros({1, d});
    e[0][i] = 1;
    trace += torch::autograd::grad({r}, {yg}, {e}, true)[0][0][i].item<double>();
  }
  SureOptions opt;
  opt.probes = 1;
  std::vector<double> est;
  for (int i = 0; i < 800; ++i)
    est.push_back(sure_loss(dae, y, s, torch::randint(0, 2, {1, 1, d}).to(torch::kFloat32) * 2 - 1, {}, opt)
                      .div.item<double>());
  auto t = torch::tensor(est, torch::kFloat64);
  const double mean = t.mean().item<double>(), se = t.std().item<double>() / std::sqrt(800.0);
  EXPECT_LT(std::abs(mean - trace), 4 * se + 1e-6) << "trace " << trace << " estimate " << mean << " ± " << se;
}

TEST(SpectralNorm, LargestSingularValueIsOneAfterTraining) {
  const std::string dir = temp_dir("sn");
  auto cfg = stage1_config(40);
  cfg.set("stage1.lr=3.0e-3", "test");
  LocalCommunicator comm;
  Stage1 s(cfg, comm, dir, synthetic_train(), nullptr, false);
  ASSERT_EQ(s.run(), kExitOk);
  torch::NoGradGuard ng;
  for (auto& l : s.dae()->normalized_layers()) {
    const double smax = torch::linalg_svdvals(l->raw_weight())[0].item<double>();
    EXPECT_NEAR(smax / l->sigma_estimate(), 1.0, 0.02);  // ‖W / σ̂‖₂ ≈ 1
  }
  fs::remove_all(dir);
}

TEST(Trainer, ResumeIsBitwiseOnOneRankAndSigusr1Exits75) {
  const int64_t N = 5;
  LocalCommunicator comm;
  const std::string a = temp_dir("straight"), b = temp_dir("resumed");
  {
    Stage1 s(stage1_config(2 * N), comm, a, synthetic_train(), nullptr, false);
    ASSERT_EQ(s.run(), kExitOk);
  }
  signals::clear();
  {
    Stage1 s(stage1_config(2 * N), comm, b, synthetic_train(), nullptr, false);
    auto inner = s.trainer().loss;
    s.trainer().loss = [&](const Batch& bt) {
      if (bt.step == N - 1 && bt.micro == 0) std::raise(SIGUSR1);  // a real signal mid-run
      return inner(bt);
    };
    ASSERT_EQ(s.run(), kExitStopped);
  }
  signals::clear();
  const std::string ck = fmt::format("{}/ckpt-{:08d}", b, N);
  ASSERT_TRUE(Trainer::is_complete(ck));
  EXPECT_EQ(Trainer::latest_checkpoint(b), ck);
  EXPECT_TRUE(file_exists(ck + "/optim.pt") && file_exists(ck + "/state.json") && file_exists(ck + "/dae.json"));
  EXPECT_FALSE(file_exists(stage_final_dir(b)));
  {
    Stage1 s(stage1_config(2 * N), comm, b, synthetic_train(), nullptr, true);
    ASSERT_EQ(s.run(), kExitOk);
  }
  auto ta = load_safetensors(stage_final_dir(a) + "/dae" + "/model.safetensors");
  auto tb = load_safetensors(stage_final_dir(b) + "/dae" + "/model.safetensors");
  ASSERT_EQ(ta.size(), tb.size());
  for (auto& [k, v] : ta) EXPECT_TRUE(torch::equal(v, tb.at(k))) << k;
  EXPECT_TRUE(ta.count("input_proj.weight_orig") && ta.count("input_proj.weight_u") && ta.count("blocks.1.fc2.weight_v"));
  auto dae = Dae::load(stage_final_dir(b) + "/dae");
  EXPECT_DOUBLE_EQ(dae->sigma0(), 0.04);
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST(Trainer, RejectsABatchThatRanksCannotSplit) {
  LocalCommunicator comm;
  auto cfg = stage1_config(2);
  cfg.set("stage1.grad_accum=5", "test");
  EXPECT_THROW(Stage1(cfg, comm, temp_dir("bad"), synthetic_train(), nullptr, false), Error);
}

TEST(Sigma, LogUniformScheduleDecaysToSigma0) {
  SigmaSchedule s;
  s.sigma0 = 0.04, s.sigma_max = 0.08, s.total_steps = 100, s.decay_fraction = 0.2;
  EXPECT_NEAR(s.upper(0), 0.08, 1e-12);
  EXPECT_NEAR(s.upper(10), std::sqrt(0.04 * 0.08), 1e-12);
  EXPECT_NEAR(s.upper(20), 0.04, 1e-12);
  EXPECT_NEAR(s.upper(90), 0.04, 1e-12);
  for (double u : {0.0, 0.3, 0.99}) EXPECT_TRUE(s.draw(5, u) >= 0.04 && s.draw(5, u) <= s.upper(5));
  s.mode = "fixed";
  EXPECT_EQ(s.draw(0, 0.7), 0.04);
}

TEST(DaeTable, WienerFiltersOnGaussianData) {
  // Gaussian data: the noisy-only Wiener filter approaches the oracle; both beat the noisy input; the identity DAE
  // (zero output projection) equals the noisy input.
  torch::manual_seed(test::seed(11));
  const int64_t d = 16;
  const double sigma = 0.3;
  // Latent scales from 1 down to 0.02: most directions are buried in the noise, where the filters gain most.
  auto A = torch::randn({d, d}) * torch::linspace(1.0, 0.02, d).unsqueeze(1) / std::sqrt(double(d));
  auto make = [&](int64_t n) {
    auto x = torch::matmul(torch::randn({n, d}), A) + 1.0;
    return std::make_pair(x, x + sigma * torch::randn({n, d}));
  };
  auto [xt, yt] = make(20000);
  InMemoryDataset train(yt, {}, sigma);
  at::Tensor mean, cov;
  row_moments(train, 0, mean, cov);
  auto wn = wiener_from_noisy(mean, cov, sigma);
  auto [xe, ye] = make(4000);
  DaeOptions o;
  o.dim = d, o.hidden = 8, o.depth = 1;
  Dae identity(o);
  auto [xo, yo] = make(20000);  // the oracle is fitted on other rows than the ones scored
  auto r = dae_row(identity, sigma, wn, wiener_oracle(xo, sigma), xe, ye);
  EXPECT_NEAR(r.mse_noisy, d * sigma * sigma, 0.05 * d * sigma * sigma);
  EXPECT_NEAR(r.mse_dae, r.mse_noisy, 1e-9);
  EXPECT_LT(r.mse_wiener_oracle, 0.8 * r.mse_noisy);
  EXPECT_LT(r.mse_wiener_noisy_only, 1.02 * r.mse_wiener_oracle);
  EXPECT_GE(r.mse_wiener_noisy_only, 0.98 * r.mse_wiener_oracle);
  EXPECT_NE(format_table({{"test", r}}, sigma).find("oracle"), std::string::npos);
  // Issue 36: the cuts' intervals hold the point value; the identity "DAE" cuts nothing, exactly, on every resample;
  // the Wiener filter's cut minus the DAE's is the Wiener cut, its interval the Wiener cut's.
  EXPECT_EQ(r.cut_dae_ci, std::make_pair(0.0, 0.0));
  const double w_cut = 1 - r.mse_wiener_noisy_only / r.mse_noisy;
  EXPECT_LT(r.cut_wiener_ci.first, w_cut);
  EXPECT_GT(r.cut_wiener_ci.second, w_cut);
  EXPECT_LT(r.cut_wiener_ci.second - r.cut_wiener_ci.first, 0.1);
  EXPECT_NEAR(r.cut_dae_minus_wiener_ci.first, -r.cut_wiener_ci.second, 1e-9);
  EXPECT_NEAR(r.cut_dae_minus_wiener_ci.second, -r.cut_wiener_ci.first, 1e-9);
  // A hand-made case: every row's error halved, so every resample cuts exactly 50 %.
  const auto half = mse_cut_ci({1, 2, 3, 4}, {2, 4, 6, 8}, 200, 7);
  EXPECT_NEAR(half.first, 0.5, 1e-12);
  EXPECT_NEAR(half.second, 0.5, 1e-12);

  // The wiener-inverter baseline trains on W(y) from wiener_data and eval re-applies W from the saved file: both
  // must be the filter fitted here, bit for bit.
  TempDir dir("wiener");
  const std::string path = dir.str() + "/wiener.safetensors";
  wn.save(path, sigma);
  auto back = LinearEstimator::load(path);
  EXPECT_TRUE(torch::equal(back.W, wn.W));
  EXPECT_TRUE(torch::equal(back.mean, wn.mean));
  EXPECT_EQ(read_safetensors(path).metadata.at("sigma"), "0.29999999999999999");
  auto data = wiener_data(std::make_shared<InMemoryDataset>(ye, std::vector<std::string>(4000, "t"), sigma), back);
  EXPECT_EQ(data.input, "wiener");
  EXPECT_TRUE(torch::equal(data.embeddings({5, 0, 3999}), wn.apply(ye.index({torch::tensor({5, 0, 3999})}))));
  auto refused = [&](const TensorMap& t, int64_t dim, const std::string& why) {
    save_safetensors(path, t);
    try {
      LinearEstimator::load(path, dim);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused({{"mean", wn.mean}, {"W", wn.W}}, d + 1, "a filter for 16-d embeddings, the run's are 17-d");
  auto nan_w = wn.W.clone();
  nan_w[2][3] = std::nan("");
  refused({{"mean", wn.mean}, {"W", nan_w}}, d, "non-finite values in the filter");
  save_safetensors(path, {{"mean", wn.mean}});
  EXPECT_THROW(
      {
        try {
          LinearEstimator::load(path);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("not a linear estimator"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}

TEST(Trainer, GradientAccumulationMatchesOneBigBatch) {
  LocalCommunicator comm;
  const std::string a = temp_dir("accum1"), b = temp_dir("accum3");
  {
    Stage1 s(stage1_config(4), comm, a, synthetic_train(), nullptr, false);
    ASSERT_EQ(s.run(), kExitOk);
  }
  {
    auto cfg = stage1_config(4);
    cfg.set("stage1.grad_accum=3", "test");
    Stage1 s(cfg, comm, b, synthetic_train(), nullptr, false);
    ASSERT_EQ(s.run(), kExitOk);
  }
  auto ta = load_safetensors(stage_final_dir(a) + "/dae" + "/model.safetensors");
  auto tb = load_safetensors(stage_final_dir(b) + "/dae" + "/model.safetensors");
  double m = 0;
  for (auto& [k, v] : ta) m = std::max(m, (v - tb.at(k)).abs().max().item<double>());
  EXPECT_LE(m, 1e-5) << "batch 12 vs 3 × 4: max |Δ| = " << m;
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST(Trainer, PerGroupClippingAndSchedules) {
  // Two groups: the clipped group's gradient norm is at most its cap after the step hook; lr follows the schedule.
  LocalCommunicator comm;
  torch::manual_seed(test::seed(1));
  auto lin1 = torch::nn::Linear(4, 4), lin2 = torch::nn::Linear(4, 1);
  TrainerOptions o;
  o.stage_dir = temp_dir("groups");
  o.total_steps = 6, o.global_batch = 8, o.warmup_steps = 2, o.schedule = "linear", o.clip_norm = 0;
  o.ckpt_every = 0, o.log_every = 3;
  auto x = torch::randn({32, 4}) * 100;
  Trainer t(comm, o, 32, ModuleList{{"a.", lin1.ptr()}, {"b.", lin2.ptr()}},
            {ParamGroupSpec{"a", lin1->parameters(), 1e-2, 0.0, 1e-3}, ParamGroupSpec{"b", lin2->parameters(), 1e-2}});
  double worst = 0;
  std::vector<double> used;  // the learning rate group b's AdamW actually held at each step
  t.terms = {"loss"};
  t.loss = [&](const Batch& b) {
    if (b.step > 0) used.push_back(t.current_lrs()[1]);
    auto idx = torch::tensor(b.rows, torch::kInt64);
    LossOutput out;
    out.loss = lin2->forward(torch::relu(lin1->forward(x.index_select(0, idx)))).pow(2).mean();
    out.terms["loss"] = out.loss.item<double>();
    return out;
  };
  EXPECT_NEAR(t.lr_factor(0), 0.5, 1e-12);
  EXPECT_NEAR(t.lr_factor(1), 1.0, 1e-12);
  EXPECT_NEAR(t.lr_factor(4), 0.5, 1e-12);
  ASSERT_EQ(t.run(), kExitOk);
  double sq = 0;
  for (auto& p : lin1->parameters()) sq += p.grad().pow(2).sum().item<double>();
  worst = std::sqrt(sq);
  EXPECT_LE(worst, 1e-3 * 1.0001);
  // Warmup 2 then linear decay over the remaining 4 steps: 0.5, 1, 1, 0.75, 0.5 (× 1e-2) before steps 2..6.
  const std::vector<double> want{0.5e-2, 1e-2, 1e-2, 0.75e-2, 0.5e-2};
  ASSERT_EQ(used.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(used[i], want[i], 1e-12) << "step " << i + 1;
  auto ta = load_safetensors(stage_final_dir(o.stage_dir) + "/model.safetensors");
  EXPECT_TRUE(ta.count("a.weight") && ta.count("b.bias"));
  fs::remove_all(o.stage_dir);
}
