// Stages 2–3 and the Trainer's checkpoint rules: PCGrad against hand-computed vectors, the λ schedule, λ ≡ 0 is a
// stage-1 step, resume equivalence, the inverter's shapes and an overfit run, SentencePiece determinism, refusing to
// mix runs, damaged checkpoints.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../support/toy_run.h"
#include "cli/config_guard.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/safetensors.h"
#include "core/signals.h"
#include "data/run_layout.h"
#include "dist/communicator.h"
#include "eval/metrics.h"
#include "model/net/generate.h"
#include "model/net/precision.h"
#include "stages/recipes/pcgrad.h"
#include "stages/recipes/stage1.h"
#include "stages/recipes/stage2.h"
#include "stages/recipes/stage3.h"
#include "stages/loop/trainer.h"
#include "../support/test_seed.h"

using namespace daei;
namespace fs = std::filesystem;

namespace {

std::string tmp(const std::string& name) {
  auto p = fs::temp_directory_path() / fmt::format("daei-stages-{}-{}", name, ::getpid());
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

using test::max_diff_files;

at::Tensor v(std::vector<float> x) { return torch::tensor(x); }

}  // namespace

TEST(Pcgrad, HandComputedCases) {
  {  // conflicting: ⟨[-1,1],[1,0]⟩ = -1 → g_ce − (−1/1)·[1,0] = [0,1]
    std::vector<at::Tensor> ce{v({-1, 1})}, su{v({1, 0})};
    auto st = pcgrad_project(ce, su, false);
    EXPECT_TRUE(torch::allclose(ce[0], v({0, 1})));
    EXPECT_EQ(st.conflicts, 1);
    EXPECT_NEAR(st.cosine, -1 / std::sqrt(2.0), 1e-12);
  }
  {  // not conflicting: unchanged
    std::vector<at::Tensor> ce{v({1, 1})}, su{v({1, 0})};
    EXPECT_EQ(pcgrad_project(ce, su, false).conflicts, 0);
    EXPECT_TRUE(torch::equal(ce[0], v({1, 1})));
  }
  {  // orthogonal (inner product 0): unchanged
    std::vector<at::Tensor> ce{v({0, 2})}, su{v({1, 0})};
    EXPECT_EQ(pcgrad_project(ce, su, false).conflicts, 0);
    EXPECT_TRUE(torch::equal(ce[0], v({0, 2})));
  }
  {  // ‖g_sure‖ = 0: skipped
    std::vector<at::Tensor> ce{v({-1, 1})}, su{v({0, 0})};
    EXPECT_EQ(pcgrad_project(ce, su, false).conflicts, 0);
    EXPECT_TRUE(torch::equal(ce[0], v({-1, 1})));
  }
  {  // per tensor vs whole: tensor 1 conflicts, the whole does not (⟨·⟩ = −1 + 3 = 2)
    std::vector<at::Tensor> ce{v({-1, 0}), v({0, 3})}, su{v({1, 0}), v({0, 1})};
    auto ce_whole = std::vector<at::Tensor>{ce[0].clone(), ce[1].clone()};
    auto st = pcgrad_project(ce, su, false);
    EXPECT_EQ(st.conflicts, 1);
    EXPECT_TRUE(torch::allclose(ce[0], v({0, 0})));
    EXPECT_TRUE(torch::equal(ce[1], v({0, 3})));
    EXPECT_EQ(pcgrad_project(ce_whole, su, true).conflicts, 0);
    EXPECT_TRUE(torch::equal(ce_whole[0], v({-1, 0})));
  }
  {  // whole, conflicting: g = [-2, 1 | 0], s = [1, 0 | 1]: ⟨⟩ = −2, ‖s‖² = 2 → g + s = [-1, 1 | 1]
    std::vector<at::Tensor> ce{v({-2, 1}), v({0})}, su{v({1, 0}), v({1})};
    EXPECT_EQ(pcgrad_project(ce, su, true).conflicts, 1);
    EXPECT_TRUE(torch::allclose(ce[0], v({-1, 1})));
    EXPECT_TRUE(torch::allclose(ce[1], v({1})));
  }
}

TEST(Pcgrad, LambdaSchedule) {
  EXPECT_DOUBLE_EQ(lambda_schedule(0, 10, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(lambda_schedule(5, 10, 1.0), 0.5);
  EXPECT_DOUBLE_EQ(lambda_schedule(10, 10, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(lambda_schedule(50, 10, 0.8), 0.8);
  EXPECT_DOUBLE_EQ(lambda_schedule(0, 0, 1.0), 1.0);
}

TEST(Inverter, ShapesMaskAndTokenLoss) {
  torch::manual_seed(test::seed(3));
  InverterConfig c;
  c.dim = 12, c.repeat = 4;
  c.t5.vocab_size = 50, c.t5.d_model = 16, c.t5.d_kv = 4, c.t5.d_ff = 32, c.t5.num_layers = 1;
  c.t5.num_decoder_layers = 1, c.t5.num_heads = 2, c.t5.dropout_rate = 0.0;
  Inverter inv(c);
  auto e = torch::randn({3, 12});
  EXPECT_EQ(inv->project(e).sizes(), (std::vector<int64_t>{3, 4, 16}));
  EXPECT_THROW(inv->project(torch::randn({3, 11})), Error);
  auto labels = labels_from_rows({{5, 6, 1}, {7, 1}, {8, 9, 10, 11, 1}});
  EXPECT_EQ(labels.sizes(), (std::vector<int64_t>{3, 5}));  // padded to the longest row only
  EXPECT_EQ(labels[1][2].item<int64_t>(), -100);
  auto tl = inv->loss(e, labels);
  EXPECT_EQ(tl.count, 10);
  // Against the full-logits path: mean CE × count.
  auto x = inv->project(e);
  auto mask = torch::ones({3, 4}, torch::kLong);
  auto ref = inv->t5->forward(x, mask, labels).loss;
  EXPECT_NEAR(tl.sum.item<double>(), ref.item<double>() * 10, 1e-4);
  // Chunked LM head = one chunk.
  auto h = inv->t5->decoder->forward(inv->t5->embed(inv->t5->shift_right(labels)), {}, inv->t5->encode(x, mask), mask);
  EXPECT_NEAR(t5_token_loss(*inv->t5, h, labels, 3).sum.item<double>(), tl.sum.item<double>(), 1e-4);
  // Save / load round trip.
  const std::string d = tmp("inv");
  inv->save(d);
  auto back = InverterImpl::load(d);
  inv->eval();
  EXPECT_NEAR(back->loss(e, labels).sum.item<double>(), inv->loss(e, labels).sum.item<double>(), 1e-5);
  EXPECT_TRUE(file_exists(d + "/config.json") && file_exists(d + "/model.safetensors"));
  fs::remove_all(d);
}

TEST(Stage2, SentencePieceTrainingIsDeterministic) {
  LocalCommunicator one;
  auto data = test::toy_dataset(test::toy_texts(200), 8, 0.04);
  const std::string a = tmp("spm-a"), b = tmp("spm-b");
  auto cfg = test::toy_config(1, 4);
  run_tokenizer(cfg, one, a, *data);
  run_tokenizer(cfg, one, b, *data);
  // The pieces and their scores (spm.vocab); spm.model also records the input file's path, which differs.
  EXPECT_EQ(read_file(a + "/tokenizer/spm.vocab"), read_file(b + "/tokenizer/spm.vocab"));
  const auto before = fs::last_write_time(a + "/tokenizer/spm.model");
  run_tokenizer(cfg, one, a, *data);  // reused, not retrained
  EXPECT_EQ(fs::last_write_time(a + "/tokenizer/spm.model"), before);
  fs::remove_all(a);
  fs::remove_all(b);
}

namespace {
struct Toy {
  std::shared_ptr<InMemoryDataset> data;
  std::shared_ptr<SpmTokenizer> tok;
  std::string dir;
  explicit Toy(const std::string& name, int64_t n = 48) {
    dir = tmp(name);
    LocalCommunicator one;
    data = test::toy_dataset(test::toy_texts(n), 16, 0.04);
    tok = run_tokenizer(test::toy_config(1, 4), one, dir, *data);
  }
  ~Toy() { fs::remove_all(dir); }
};
}  // namespace

TEST(Stage2, ResumeIsBitwiseWithDropout) {
  Toy t("s2resume");
  LocalCommunicator one;
  auto cfg = test::toy_config(6, 8);
  cfg.set("inverter.dropout=0.1", "test");  // keyed re-seeding makes dropout resumable
  {
    InverterStage s(cfg, one, "stage2", t.dir + "/a", noisy_data(t.data), t.tok, false, false);
    ASSERT_EQ(s.run(), kExitOk);
  }
  {
    auto c2 = cfg;
    c2.set("train.stop_after=3", "test");
    InverterStage s(c2, one, "stage2", t.dir + "/b", noisy_data(t.data), t.tok, false, false);
    ASSERT_EQ(s.run(), kExitStopped);
  }
  {
    InverterStage s(cfg, one, "stage2", t.dir + "/b", noisy_data(t.data), t.tok, true, false);
    ASSERT_EQ(s.run(), kExitOk);
  }
  EXPECT_EQ(max_diff_files(t.dir + "/a/final/inverter/model.safetensors", t.dir + "/b/final/inverter/model.safetensors"),
            0.0);
  EXPECT_TRUE(file_exists(t.dir + "/a/final/inverter/config.json"));
}

// Checkpoints are fp32 whatever train.precision was: a run stopped under one precision resumes under the other and
// ends near the run that used fp32 throughout (model/net/precision.h; main sets the precision, a guard does it here).
TEST(Stage2, ResumesAcrossPrecisions) {
  Toy t("s2precision");
  LocalCommunicator one;
  auto cfg = test::toy_config(6, 8);
  auto run = [&](const std::string& dir, Precision p, bool resume, bool stop) {
    MatmulPrecisionGuard g(p);
    auto c = cfg;
    c.set(fmt::format("train.precision={}", precision_name(p)), "test");
    if (stop) c.set("train.stop_after=3", "test");
    InverterStage s(c, one, "stage2", dir, noisy_data(t.data), t.tok, resume, false);
    return s.run();
  };
  ASSERT_EQ(run(t.dir + "/fp32", Precision::fp32, false, false), kExitOk);
  const Precision fp32 = Precision::fp32, bf16 = Precision::bf16;
  for (auto [first, then] : {std::pair{fp32, bf16}, std::pair{bf16, fp32}}) {
    const std::string dir = t.dir + "/" + precision_name(first) + "-then-" + precision_name(then);
    ASSERT_EQ(run(dir, first, false, true), kExitStopped);
    ASSERT_EQ(run(dir, then, true, false), kExitOk);
    // The resumed run continued from step 3 (its metrics go on from there) and ended near the fp32 run: 6 Adam steps
    // of lr 1e-3 move a weight by at most ~6e-3, so bf16's gradient noise can shift it by that much, not more.
    const double d = max_diff_files(t.dir + "/fp32/final/inverter/model.safetensors",
                                    dir + "/final/inverter/model.safetensors");
    std::cout << "[precision] stage 2, " << precision_name(first) << " then " << precision_name(then)
              << ": max |weight − fp32 run's| " << d << "\n";
    EXPECT_GT(d, 0.0);
    EXPECT_LT(d, 1e-2);
    std::ifstream metrics(dir + "/metrics.jsonl");
    std::vector<int64_t> steps;
    for (std::string l; std::getline(metrics, l);) {
      auto j = nlohmann::json::parse(l);
      if (j.contains("loss") && !j.contains("eval")) steps.push_back(j.at("step"));
    }
    EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6})) << dir;
  }
}

// train.seed (stages::attack_seed) retrains the attack's models with a seed of their own: unset (-1) it is run.seed,
// bit for bit; another value changes the weights; the config guard keeps the corpus, caches and pretrain for it.
TEST(Stage2, TrainSeedIsRunSeedUnlessSetAndKeepsSharedWork) {
  Toy t("s2seed");
  LocalCommunicator one;
  auto train = [&](const std::string& name, const std::vector<std::string>& sets) {
    auto c = test::toy_config(4, 8);
    for (const auto& s : sets) c.set(s, "test");
    InverterStage s(c, one, "stage2", t.dir + "/" + name, noisy_data(t.data), t.tok, false, false);
    EXPECT_EQ(s.run(), kExitOk);
    return t.dir + "/" + name + "/final/inverter/model.safetensors";
  };
  const auto base = train("unset", {});
  const auto same = train("same", {fmt::format("train.seed={}", test::toy_config(4, 8).integer("run.seed"))});
  const auto other = train("other", {"train.seed=7"});
  EXPECT_EQ(max_diff_files(base, same), 0.0);
  EXPECT_GT(max_diff_files(base, other), 0.0);
  EXPECT_EQ(Config::defaults().integer("train.seed"), -1);
  const auto fed = cli::work_depending_on("train.seed");
  for (const char* kept : {"corpus", "cache", "tokenizer", "pretrain", "lm", "embedder"})
    EXPECT_EQ(std::find(fed.begin(), fed.end(), kept), fed.end()) << kept;
  for (const char* retrained : {"stage1", "stage2", "noisy-inverter", "stage3", "cache/hyp-train", "stage4"})
    EXPECT_NE(std::find(fed.begin(), fed.end(), retrained), fed.end()) << retrained;
}

TEST(Stage3, LambdaZeroIsAStage1StepAndLeavesTheInverter) {
  Toy t("s3lambda0");
  LocalCommunicator one;
  auto cfg = test::toy_config(1, 8);
  for (const char* s : {"stage3.lambda_max=0.0", "stage3.dae_clip_norm=0.0", "stage1.schedule=constant",
                        "stage1.warmup_steps=0", "stage3.warmup_steps=0", "stage1.sigma.mode=fixed",
                        "stage1.lr=2.0e-4", "stage3.lr_dae=2.0e-4", "stage1.eval_every=0"})
    cfg.set(s, "test");
  {
    Stage1 s1(cfg, one, t.dir + "/stage1", t.data, nullptr, false);
    s1.dae()->save(t.dir + "/dae0");  // the starting point of both (at the data's σ₀, 0.04)
    ASSERT_EQ(s1.run(), kExitOk);
  }
  make_inverter(cfg, 16, t.tok->vocab_size())->save(t.dir + "/inv0");
  {
    Stage3 s3(cfg, one, t.dir + "/stage3", t.data, t.tok, t.dir + "/dae0", t.dir + "/inv0", false, false);
    ASSERT_EQ(s3.run(), kExitOk);
  }
  const double dae_diff = max_diff_files(t.dir + "/stage1/final/dae/model.safetensors",
                                         t.dir + "/stage3/final/dae/model.safetensors");
  EXPECT_LE(dae_diff, 1e-7) << "stage 3 with λ = 0 vs a stage-1 step: max |Δ| = " << dae_diff;
  EXPECT_GT(max_diff_files(t.dir + "/dae0/model.safetensors", t.dir + "/stage3/final/dae/model.safetensors"), 0.0);
  EXPECT_EQ(max_diff_files(t.dir + "/inv0/model.safetensors", t.dir + "/stage3/final/inverter/model.safetensors"), 0.0);
  EXPECT_EQ(max_diff_files(t.dir + "/inv0/embedding_transform.safetensors",
                           t.dir + "/stage3/final/inverter/embedding_transform.safetensors"),
            0.0);
}

TEST(Stage3, ResumeIsBitwise) {
  Toy t("s3resume");
  LocalCommunicator one;
  auto cfg = test::toy_config(6, 8);
  cfg.set("stage3.lambda_warmup_steps=2", "test");
  {
    torch::manual_seed(test::seed(4));
    Dae dae(dae_options(cfg, 16));
    dae->set_sigma0(0.04);
    dae->save(t.dir + "/dae0");
    make_inverter(cfg, 16, t.tok->vocab_size())->save(t.dir + "/inv0");
  }
  {
    Stage3 s(cfg, one, t.dir + "/a", t.data, t.tok, t.dir + "/dae0", t.dir + "/inv0", false, false);
    ASSERT_EQ(s.run(), kExitOk);
  }
  {
    auto c2 = cfg;
    c2.set("train.stop_after=3", "test");
    Stage3 s(c2, one, t.dir + "/b", t.data, t.tok, t.dir + "/dae0", t.dir + "/inv0", false, false);
    ASSERT_EQ(s.run(), kExitStopped);
  }
  {
    Stage3 s(cfg, one, t.dir + "/b", t.data, t.tok, t.dir + "/dae0", t.dir + "/inv0", true, false);
    ASSERT_EQ(s.run(), kExitOk);
  }
  for (const std::string f : {"dae/model.safetensors", "inverter/model.safetensors"})
    EXPECT_EQ(max_diff_files(t.dir + "/a/final/" + f, t.dir + "/b/final/" + f), 0.0) << f;
}

// Issue 36: stage3.select_by heldout_bleu (DAEI's selection). Evaluations at steps 2, 4 and 6 score 0.3, 0.7 and
// 0.5 (a rigged score; one value per evaluation): the final models are step 4's, kept in stage3/best/, and equal
// those of a run stopped at step 4; without selection the final models are the last step's.
TEST(Stage3, SelectionByHeldoutScoreKeepsTheBestEvaluatedModels) {
  Toy t("s3select");
  LocalCommunicator one;
  auto cfg = test::toy_config(6, 8);
  cfg.set("stage3.eval_every=2", "test");
  cfg.set("train.heldout_rows=5", "test");
  cfg.set("stage3.lambda_warmup_steps=0", "test");
  {
    torch::manual_seed(test::seed(4));
    Dae dae(dae_options(cfg, 16));
    dae->set_sigma0(0.04);
    dae->save(t.dir + "/dae0");
    make_inverter(cfg, 16, t.tok->vocab_size())->save(t.dir + "/inv0");
  }
  auto rigged = [](std::shared_ptr<int> calls) {
    return [calls](const std::string& hyp, const std::string& ref) {
      EXPECT_FALSE(ref.empty());
      (void)hyp;
      const double by_eval[] = {0.3, 0.7, 0.5};
      return by_eval[std::min(2, (*calls)++ / 5)];  // 5 held-out rows an evaluation
    };
  };
  auto run = [&](const std::string& name, const Config& c, bool select, int expect) {
    Stage3 s(c, one, t.dir + "/" + name, t.data, t.tok, t.dir + "/dae0", t.dir + "/inv0", false, false);
    if (select) s.select_by(rigged(std::make_shared<int>(0)));
    s.enable_heldout(c, one, t.data);
    ASSERT_EQ(s.run(), expect);
  };
  run("sel", cfg, true, kExitOk);
  run("last", cfg, false, kExitOk);
  auto c4 = cfg;
  c4.set("train.stop_after=4", "test");
  run("sel4", c4, true, kExitStopped);
  const std::string inv = "inverter/model.safetensors", dae = "dae/model.safetensors";
  const auto best = nlohmann::json::parse(read_file(t.dir + "/sel/best/best.json"));
  EXPECT_EQ(best.at("step").get<int64_t>(), 4);
  EXPECT_DOUBLE_EQ(best.at("score").get<double>(), 0.7);
  for (const auto& f : {inv, dae}) {
    EXPECT_EQ(max_diff_files(t.dir + "/sel/final/" + f, t.dir + "/sel/best/" + f), 0.0) << f;
    EXPECT_EQ(max_diff_files(t.dir + "/sel/best/" + f, t.dir + "/sel4/best/" + f), 0.0) << f;  // = step 4's models
    EXPECT_GT(max_diff_files(t.dir + "/sel/final/" + f, t.dir + "/last/final/" + f), 0.0) << f;
  }
  EXPECT_NE(read_file(t.dir + "/sel/metrics.jsonl").find("heldout_bleu"), std::string::npos);
  // Selection without evaluations is refused in one line, not skipped.
  auto c0 = cfg;
  c0.set("stage3.eval_every=0", "test");
  Stage3 s(c0, one, t.dir + "/none", t.data, t.tok, t.dir + "/dae0", t.dir + "/inv0", false, false);
  s.select_by(rigged(std::make_shared<int>(0)));
  try {
    s.enable_heldout(c0, one, t.data);
    FAIL() << "selection without evaluations was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("select_by heldout_bleu needs stage3.eval_every > 0"), std::string::npos)
        << e.what();
  }
}

TEST(Trainer, FreshRunRefusesAnEarlierRunsCheckpointsAndForceArchives) {
  Toy t("fresh");
  LocalCommunicator one;
  auto cfg = test::toy_config(3, 8);
  cfg.set("train.stop_after=2", "test");
  {
    InverterStage s(cfg, one, "stage2", t.dir + "/s", noisy_data(t.data), t.tok, false, false);
    ASSERT_EQ(s.run(), kExitStopped);
  }
  try {
    InverterStage s(cfg, one, "stage2", t.dir + "/s", noisy_data(t.data), t.tok, false, false);
    s.run();
    FAIL() << "a fresh run over an earlier run's checkpoints was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt-00000002"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(Trainer::is_complete(t.dir + "/s/ckpt-00000002"));  // untouched
  {
    InverterStage s(cfg, one, "stage2", t.dir + "/s", noisy_data(t.data), t.tok, false, true);
    ASSERT_EQ(s.run(), kExitStopped);
  }
  int archives = 0;
  for (auto& e : fs::directory_iterator(t.dir + "/s"))
    if (e.path().filename().string().rfind("archive-", 0) == 0) {
      ++archives;
      EXPECT_TRUE(fs::exists(e.path() / "ckpt-00000002"));
    }
  EXPECT_EQ(archives, 1);
}

TEST(Trainer, DamagedNewestCheckpointFallsBackAndDamagedFinalIsNotComplete) {
  Toy t("damaged");
  LocalCommunicator one;
  auto cfg = test::toy_config(4, 8);
  cfg.set("train.ckpt_every=1", "test");
  cfg.set("train.keep_last=3", "test");
  cfg.set("train.stop_after=3", "test");
  {
    InverterStage s(cfg, one, "stage2", t.dir + "/s", noisy_data(t.data), t.tok, false, false);
    ASSERT_EQ(s.run(), kExitStopped);
  }
  const std::string newest = t.dir + "/s/ckpt-00000003", prev = t.dir + "/s/ckpt-00000002";
  EXPECT_EQ(Trainer::latest_checkpoint(t.dir + "/s"), newest);
  {  // flip one byte in the middle of the newest checkpoint's weights
    std::fstream f(newest + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(newest + "/model.safetensors") / 2));
    f.put('\x5a');
  }
  EXPECT_NE(Trainer::verify(newest).find("model.safetensors"), std::string::npos);
  EXPECT_EQ(Trainer::latest_checkpoint(t.dir + "/s"), prev);
  {  // garbage state.json of the fallback is named in the error once the checksums are bypassed
    cfg.set("train.stop_after=0", "test");
    InverterStage s(cfg, one, "stage2", t.dir + "/s", noisy_data(t.data), t.tok, true, false);
    ASSERT_EQ(s.run(), kExitOk);
  }
  EXPECT_TRUE(RunLayout(t.dir).stage_complete("s"));
  fs::resize_file(t.dir + "/s/final/inverter/model.safetensors", 100);
  EXPECT_FALSE(RunLayout(t.dir).stage_complete("s"));
}

TEST(Inverter, OverfitsThirtyTwoSentencesFromCleanEmbeddings) {
  // A small T5 learns to recover 32 training sentences exactly from their clean embeddings.
  at::Tensor clean;
  const auto texts = test::toy_texts(32, 77);
  auto noisy = test::toy_dataset(texts, 16, 0.0, 9, &clean);
  auto data = std::make_shared<InMemoryDataset>(clean, texts, 0.0);
  const std::string dir = tmp("overfit");
  LocalCommunicator one;
  auto cfg = test::toy_config(1500, 32);
  for (const char* s : {"inverter.d_model=64", "inverter.d_ff=128", "inverter.num_heads=4", "inverter.d_kv=16",
                        "stage2.lr=3.0e-3", "stage2.warmup_steps=20", "train.log_every=50"})
    cfg.set(s, "test");
  auto tok = run_tokenizer(cfg, one, dir, *data);
  InverterStage s(cfg, one, "stage2", dir + "/s", noisy_data(data), tok, false, false);
  ASSERT_EQ(s.run(), kExitOk);
  auto& inv = s.inverter();
  inv->eval();
  GenerateOptions g;
  g.max_length = 16;
  auto got = tok->decode_batch(inv->generate(clean, g));
  // What the method guarantees on any CPU: nearly every greedy decode exact, the rest partly right. A decode or two
  // in 32 that slip depend on BLAS rounding (AMD EPYC recovered 31, Intel 32; issue 32) and on the seed (31-32 of 32
  // under DAEI_TEST_SEED 0-3 here).
  int exact = 0;
  double f1 = 0;
  std::string slips;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string want = tok->decode(tok->encode(texts[i], 16));
    exact += got[i] == want;
    f1 += metrics::token_f1(got[i], want) / double(texts.size());
    if (got[i] != want) slips += " '" + got[i] + "' for '" + want + "';";
  }
  std::cout << "[overfit] " << exact << "/32 exact, mean token F1 " << f1 << (slips.empty() ? "" : ";") << slips << "\n";
  EXPECT_GE(exact, 30) << slips;
  EXPECT_GE(f1, 0.95) << slips;
  fs::remove_all(dir);
}

TEST(Trainer, MeanAndSummedLossesBothTrain) {
  // A mean loss (no count) and a summed loss (count = rows) fit y = 2x alike; a zeroed gradient would leave w at 0.
  for (const bool summed : {false, true}) {
    LocalCommunicator one;
    torch::nn::Linear lin(torch::nn::LinearOptions(1, 1).bias(false));
    { torch::NoGradGuard ng; lin->weight.zero_(); }
    TrainerOptions o;
    o.stage_dir = tmp(summed ? "sum" : "mean");
    o.total_steps = 60, o.global_batch = 8, o.clip_norm = 0, o.ckpt_every = 0, o.schedule = "constant", o.plot = false;
    Trainer t(one, o, 32, ModuleList{{"", lin.ptr()}}, {ParamGroupSpec{"w", lin->parameters(), 0.1, 0.0}});
    auto x = torch::linspace(-1, 1, 32).unsqueeze(1);
    t.terms = {"loss"};
    t.loss = [&](const Batch& b) {
      auto idx = torch::tensor(b.rows, torch::kLong);
      auto err = (lin->forward(x.index_select(0, idx)) - 2 * x.index_select(0, idx)).pow(2);
      LossOutput out;
      out.loss = summed ? err.sum() : err.mean();
      if (summed) out.count = static_cast<double>(b.rows.size());
      return out;
    };
    ASSERT_EQ(t.run(), kExitOk);
    EXPECT_NEAR(lin->weight.item<double>(), 2.0, 0.1) << (summed ? "summed" : "mean");
    fs::remove_all(o.stage_dir);
  }
}

TEST(Trainer, PrefetchNamesTheNextStepsRowsAcrossAnEpochBoundary) {
  // 20 rows, local batch 8 (2 micro-steps of 4): 2 steps an epoch, so steps 1→2 and 3→4 cross into a new epoch.
  LocalCommunicator one;
  torch::nn::Linear lin(torch::nn::LinearOptions(1, 1).bias(false));
  TrainerOptions o;
  o.stage_dir = tmp("prefetch");
  o.total_steps = 5, o.global_batch = 8, o.grad_accum = 2, o.ckpt_every = 0, o.plot = false;
  Trainer t(one, o, 20, ModuleList{{"", lin.ptr()}}, {ParamGroupSpec{"w", lin->parameters(), 0.1, 0.0}});
  std::vector<std::vector<int64_t>> read(5), hinted(5);
  int64_t hints = 0;
  t.terms = {"loss"};
  t.prefetch = [&](const std::vector<int64_t>& rows) { hinted.at(static_cast<size_t>(++hints)) = rows; };
  t.loss = [&](const Batch& b) {
    auto& r = read.at(static_cast<size_t>(b.step));
    r.insert(r.end(), b.rows.begin(), b.rows.end());
    LossOutput out;
    out.loss = lin->forward(torch::ones({1, 1})).sum();
    return out;
  };
  ASSERT_EQ(t.run(), kExitOk);
  EXPECT_EQ(hints, 4) << "one hint before each step that has a next step";
  for (size_t s = 1; s < 5; ++s) EXPECT_EQ(hinted[s], read[s]) << "step " << s;
  fs::remove_all(o.stage_dir);
}
