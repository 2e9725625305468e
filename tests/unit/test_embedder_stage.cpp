// The contextual embedder stage (src/stages/recipes/sentence_embedder.h) at toy sizes: its export loads through embedder.kind: t5 and
// reproduces the trainer's embeddings, the contrastive loss falls, resume is bitwise, the encoder starts from the
// pretrain stage's T5, and the global in-batch loss's gradient splits exactly over simulated ranks.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../support/toy_run.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/safetensors.h"
#include "data/run_layout.h"
#include "dist/communicator.h"
#include "model/release/transformer_embedder.h"
#include "stages/recipes/sentence_embedder.h"
#include "stages/recipes/pretrain.h"
#include "stages/recipes/stage2.h"
#include "stages/loop/trainer.h"
#include "../support/test_seed.h"

using namespace daei;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

Config embedder_config(int64_t steps) {
  auto cfg = test::toy_config(steps, 16);
  for (const std::string s : {"embedder_train.batch_size=16", "embedder_train.warmup_steps=2",
                              "embedder_train.lr=3e-3", "embedder_train.dim=16", "embedder_train.max_length=16",
                              "embedder_train.dropout=0.1", "embedder_train.eval_every=5", "train.heldout_rows=16",
                              "pretrain.steps=3", "pretrain.batch_size=8", "pretrain.warmup_steps=1",
                              "pretrain.max_length=16", "pretrain.sentinels=4", "pretrain.eval_every=0"})
    cfg.set(s, "test");
  cfg.set(fmt::format("embedder_train.steps={}", steps), "test");
  return cfg;
}

LmTrainData texts_of(std::shared_ptr<const NoisyDataset> data) {
  LmTrainData d;
  d.rows = data->size();
  d.texts = [data](const std::vector<int64_t>& rows) { return data->texts(rows); };
  return d;
}

struct Toy {
  std::string dir;
  std::shared_ptr<InMemoryDataset> data, val;
  std::shared_ptr<SpmTokenizer> tok;
  LocalCommunicator one;
  explicit Toy(const std::string& name) {
    dir = (fs::temp_directory_path() / fmt::format("daei-embedder-{}-{}", name, getpid())).string();
    fs::remove_all(dir);
    fs::create_directories(dir);
    data = test::toy_dataset(test::toy_texts(64), 16, 0.04);
    val = test::toy_dataset(test::toy_texts(20, 77), 16, 0.04);
    tok = run_tokenizer(embedder_config(1), one, dir, *data);
  }
  ~Toy() { fs::remove_all(dir); }
  EmbedderStageData stage_data(const std::string& pretrained = "") const {
    EmbedderStageData d;
    d.train = texts_of(data);
    d.val = texts_of(val);
    d.report_texts = test::toy_texts(24, 91);
    d.tokenizer_file = RunLayout(dir).tokenizer_model();
    d.pretrained_dir = pretrained;
    return d;
  }
};

// The "loss" of each logged training step of a stage's metrics.jsonl.
std::vector<double> logged_losses(const std::string& stage_dir) {
  std::ifstream in(stage_dir + "/metrics.jsonl");
  std::vector<double> out;
  for (std::string line; std::getline(in, line);) {
    auto j = json::parse(line);
    if (j.contains("loss")) out.push_back(j["loss"].get<double>());
  }
  return out;
}

}  // namespace

// Test 1: the export is a sentence-transformers directory that TransformerEmbedder (embedder.kind: t5) reads, and it
// gives the trainer's own eval-mode embeddings; the encoder starts from the pretrain stage's T5.
TEST(EmbedderStage, ExportLoadsAsT5EmbedderAndMatchesTheTrainer) {
  Toy t("export");
  const auto cfg = embedder_config(6);
  {  // a toy pretrain stage: the embedder's start
    LmStage p(cfg, t.one, t.dir + "/pretrain", texts_of(t.data), t.tok, false, false,
              pretrain_objective(cfg, t.tok->vocab_size(), t.tok->eos_id()));
    ASSERT_EQ(p.run(), kExitOk);
  }
  const std::string pre = RunLayout(t.dir).final_module("pretrain", "t5");
  {  // every encoder tensor and the token rows (sentinels dropped) come from it
    ContextualEmbedder m(lm_t5_config(cfg, t.tok->vocab_size()), 16);
    load_pretrained_encoder(*m, cfg, pre);
    const auto saved = load_safetensors(pre + "/model.safetensors");
    for (const auto& p : m->t5->named_parameters(true)) {
      auto want = saved.at(p.key());
      if (p.key() == "shared.weight") want = want.narrow(0, 0, t.tok->vocab_size());
      EXPECT_TRUE(torch::equal(p.value(), want)) << p.key();
    }
  }
  EmbedderStage s(cfg, t.one, t.dir + "/embedder", t.stage_data(pre), t.tok, false, false);
  ASSERT_EQ(s.run(), kExitOk);
  const std::string st = RunLayout(t.dir).final_module("embedder", "st");

  auto texts = test::toy_texts(21, 33);
  texts.push_back(texts[0] + " " + texts[1] + " " + texts[2] + " " + texts[3]);  // past max_length: truncated alike
  TransformerEmbedderSpec spec;
  spec.dir = st;
  spec.kind = "t5";
  spec.max_length = 128;  // the export's max_seq_length (16) caps it, as sentence-transformers does
  spec.batch_size = 5;    // other batches, other padding: the same rows
  TransformerEmbedder loaded(spec);
  EXPECT_EQ(loaded.dim(), 16);
  EXPECT_EQ(loaded.pooling(), "mean");
  EXPECT_TRUE(loaded.has_dense());
  EXPECT_TRUE(loaded.normalize());
  const auto got = loaded.embed(texts), want = s.embed(texts);
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-5)) << "max |Δ| " << (got - want).abs().max().item<double>();

  // The layout a Hugging Face / sentence-transformers reader expects.
  const auto modules = json::parse(read_file(st + "/modules.json"));
  ASSERT_EQ(modules.size(), 4u);
  EXPECT_EQ(modules[2]["path"], "2_Dense");
  EXPECT_EQ(modules[3]["type"], "sentence_transformers.models.Normalize");
  const auto config = json::parse(read_file(st + "/config.json"));
  EXPECT_EQ(config["model_type"], "t5");
  EXPECT_EQ(config["architectures"][0], "T5EncoderModel");
  EXPECT_EQ(config["vocab_size"].get<int64_t>(), t.tok->vocab_size());
  const auto dense = json::parse(read_file(st + "/2_Dense/config.json"));
  EXPECT_EQ(dense["bias"], false);
  EXPECT_EQ(dense["out_features"].get<int64_t>(), 16);
  EXPECT_EQ(json::parse(read_file(st + "/sentence_bert_config.json"))["max_seq_length"].get<int64_t>(), 16);
  EXPECT_TRUE(json::parse(read_file(st + "/1_Pooling/config.json"))["pooling_mode_mean_tokens"].get<bool>());
  EXPECT_TRUE(fs::is_directory(st + "/3_Normalize"));
  EXPECT_TRUE(file_exists(st + "/spiece.model"));
  const auto weights = load_safetensors(st + "/model.safetensors");
  EXPECT_TRUE(weights.count("shared.weight") && weights.count("encoder.final_layer_norm.weight") &&
              weights.count("encoder.block.0.layer.0.SelfAttention.q.weight"));
  for (const auto& [k, v] : weights) EXPECT_TRUE(k.rfind("shared.", 0) == 0 || k.rfind("encoder.", 0) == 0) << k;
  EXPECT_EQ(load_safetensors(st + "/2_Dense/model.safetensors").count("linear.weight"), 1u);

  // The report: σ 0 and each report σ, recall@1 a share.
  const auto rep = json::parse(read_file(RunLayout(t.dir).stage_final("embedder") + "/report.json"));
  ASSERT_EQ(rep["rows"].size(), 5u);
  EXPECT_EQ(rep["rows"][0]["sigma"].get<double>(), 0.0);
  for (const auto& r : rep["rows"]) EXPECT_GE(r["recall_at_1"].get<double>(), 0.0);
  EXPECT_NEAR(rep["rows"][0]["mean_cos"].get<double>(), 1.0, 1e-5);
  EXPECT_NE(read_file(t.dir + "/embedder/metrics.jsonl").find("heldout_uniform"), std::string::npos);
}

// Test 2: the SimCSE loss falls over a toy run (first vs last logged value).
TEST(EmbedderStage, ContrastiveLossFalls) {
  Toy t("falls");
  const auto cfg = embedder_config(40);
  EmbedderStage s(cfg, t.one, t.dir + "/embedder", t.stage_data(), t.tok, false, false);
  ASSERT_EQ(s.run(), kExitOk);
  const auto l = logged_losses(t.dir + "/embedder");
  ASSERT_GE(l.size(), 10u);
  EXPECT_LT(l.back(), 0.7 * l.front()) << "first " << l.front() << ", last " << l.back();
}

// Test 3: N steps, a stop, then a resume to 2N equals 2N steps at once, bitwise (dropout is keyed by step and rank).
TEST(EmbedderStage, ResumeIsBitwise) {
  Toy t("resume");
  const auto cfg = embedder_config(8);
  {
    EmbedderStage s(cfg, t.one, t.dir + "/a", t.stage_data(), t.tok, false, false);
    ASSERT_EQ(s.run(), kExitOk);
  }
  auto half = cfg;
  half.set("train.stop_after=4", "test");
  {
    EmbedderStage s(half, t.one, t.dir + "/b", t.stage_data(), t.tok, false, false);
    ASSERT_EQ(s.run(), kExitStopped);
  }
  {
    EmbedderStage s(cfg, t.one, t.dir + "/b", t.stage_data(), t.tok, true, false);
    ASSERT_EQ(s.run(), kExitOk);
  }
  for (const std::string f : {"/final/st/model.safetensors", "/final/st/2_Dense/model.safetensors"}) {
    EXPECT_EQ(test::max_diff_files(t.dir + "/a" + f, t.dir + "/b" + f), 0.0) << f;
  }
  // And the run changed the weights (a resume that trained nothing would also be "equal" to a run that did nothing).
  EmbedderStage fresh(cfg, t.one, t.dir + "/c", t.stage_data(), t.tok, false, false);
  const auto before = fresh.model().dense->weight.clone();
  EXPECT_FALSE(torch::equal(before, load_safetensors(t.dir + "/a/final/st/2_Dense/model.safetensors").at("linear.weight")));
}

namespace {

// One of W simulated ranks: allreduce(Sum) adds the other ranks' contributions, queued in call order.
class SimulatedRank final : public Communicator {
 public:
  SimulatedRank(int rank, int size) : rank_(rank), size_(size) {}
  std::deque<at::Tensor> others;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return rank_; }
  std::string kind() const override { return "simulated"; }
  using Communicator::allreduce;
  using Communicator::broadcast;
  void allreduce(at::Tensor& t, ReduceOp op) override {
    ASSERT_EQ(op, ReduceOp::Sum);
    ASSERT_FALSE(others.empty());
    t.add_(others.front());
    others.pop_front();
  }
  void broadcast(at::Tensor&, int) override {}
  std::vector<std::string> allgather(const std::string& s) override { return {s}; }
  void barrier() override {}
  void abort(int) override { std::abort(); }

 private:
  int rank_, size_;
};

}  // namespace

// Test 5: on hand-made embeddings, the local-slice gradients of 2 simulated ranks, summed and divided by the global
// count as the Trainer does, equal the full-batch loss's gradient (both directions of the loss).
TEST(EmbedderLoss, GlobalInBatchGradientSplitsOverRanks) {
  torch::manual_seed(test::seed(17));
  const int64_t B = 6, d = 5, W = 2, n = B / W;
  const auto a1 = torch::randn({B, d}, torch::kDouble), a2 = torch::randn({B, d}, torch::kDouble);
  auto unit = [](const at::Tensor& x) { return x / x.norm(2, 1, true); };
  for (bool symmetric : {true, false}) {
    auto f1 = a1.clone().requires_grad_(true), f2 = a2.clone().requires_grad_(true);
    in_batch_contrastive_loss(unit(f1), unit(f2), 0.05, symmetric).backward();
    auto g1 = torch::zeros_like(a1), g2 = torch::zeros_like(a2);
    double total_count = 0;
    for (int r = 0; r < W; ++r) {
      SimulatedRank comm(r, W);
      // What the other rank puts into the zero-filled buffers: its rows of each view, detached.
      for (const auto& a : {a1, a2}) {
        auto other = torch::zeros({B, d}, torch::kDouble);
        for (int q = 0; q < W; ++q)
          if (q != r) other.narrow(0, q * n, n).copy_(unit(a.narrow(0, q * n, n)));
        comm.others.push_back(other);
      }
      auto l1 = a1.narrow(0, r * n, n).clone().requires_grad_(true), l2 = a2.narrow(0, r * n, n).clone().requires_grad_(true);
      double full = 0;
      in_batch_loss_for_rank(comm, unit(l1), unit(l2), r * n, B, 0.05, symmetric, &full).backward();
      EXPECT_NEAR(full, in_batch_contrastive_loss(unit(a1), unit(a2), 0.05, symmetric).item<double>(), 1e-12);
      g1.narrow(0, r * n, n).add_(l1.grad());
      g2.narrow(0, r * n, n).add_(l2.grad());
      total_count += double(n);  // the rank's count; the Trainer divides the summed gradient by the global count
    }
    g1 /= total_count, g2 /= total_count;
    EXPECT_TRUE(torch::allclose(g1, f1.grad(), 1e-10, 1e-12)) << "symmetric " << symmetric << "\n" << g1 << f1.grad();
    EXPECT_TRUE(torch::allclose(g2, f2.grad(), 1e-10, 1e-12)) << "symmetric " << symmetric;
    EXPECT_GT(f1.grad().abs().max().item<double>(), 1e-3) << "a gradient worth comparing";
  }
}

// recall@1 by hand: a query nearer another row misses.
TEST(EmbedderLoss, RecallAtOneByHand) {
  auto clean = torch::eye(3);
  auto q = clean.clone();
  EXPECT_DOUBLE_EQ(recall_at_1(q, clean).recall, 1.0);
  q[2] = torch::tensor({0.0, 1.0, 0.1});
  const auto r = recall_at_1(q, clean);
  EXPECT_NEAR(r.recall, 2.0 / 3.0, 1e-12);
  EXPECT_LT(r.mean_cos, 1.0);
}
