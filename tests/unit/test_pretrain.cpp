// Issue 22 item 2: the pretrain stage. T5 span corruption on hand-written cases and its mask's counts, a bitwise
// resume, and the pretrained checkpoint loaded into an inverter and a corrector with every tensor accounted for.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "../support/toy_run.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "data/run_layout.h"
#include "dist/communicator.h"
#include "model/attack/corrector.h"
#include "model/attack/inverter.h"
#include "model/net/t5_pretrained.h"
#include "stages/recipes/pretrain.h"
#include "stages/recipes/stage2.h"
#include "stages/loop/trainer.h"
#include "../support/test_seed.h"

using namespace daei;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kEos = 1, kS0 = 100;  // a tokenizer of 100 pieces: sentinel k is 100 + k

// "Thank you for inviting me to your party last week ." as ids 10..20, eos last (the T5 paper's Figure 2).
std::vector<int64_t> paper_text() {
  std::vector<int64_t> ids;
  for (int64_t i = 10; i <= 20; ++i) ids.push_back(i);
  ids.push_back(kEos);
  return ids;
}

// The runs of equal values of a mask: {value, length} each.
std::vector<std::pair<bool, int64_t>> runs(const std::vector<bool>& m) {
  std::vector<std::pair<bool, int64_t>> r;
  for (bool b : m) {
    if (r.empty() || r.back().first != b) r.push_back({b, 0});
    ++r.back().second;
  }
  return r;
}

// The text back from an example (eos included): kept pieces in order, each sentinel replaced by its span.
std::vector<int64_t> reassemble(const TextExample& ex) {
  std::map<int64_t, std::vector<int64_t>> spans;
  int64_t cur = -1;
  for (int64_t t : ex.target) {
    if (t >= kS0) cur = t;
    else if (t != kEos) spans[cur].push_back(t);
  }
  std::vector<int64_t> out;
  for (int64_t t : ex.input) {
    if (t >= kS0) out.insert(out.end(), spans[t].begin(), spans[t].end());
    else out.push_back(t);
  }
  return out;
}

Config pretrain_config() {
  auto cfg = test::toy_config(6, 8);
  for (const std::string s : {"pretrain.steps=6", "pretrain.batch_size=8", "pretrain.warmup_steps=2",
                              "pretrain.max_length=16", "pretrain.eval_every=3", "train.heldout_rows=8",
                              "pretrain.noise_density=0.3", "pretrain.sentinels=4"})
    cfg.set(s, "test");
  return cfg;
}

LmTrainData texts_of(std::shared_ptr<const NoisyDataset> data) {
  LmTrainData d;
  d.rows = data->size();
  d.texts = [data](const std::vector<int64_t>& rows) { return data->texts(rows); };
  return d;
}

}  // namespace

TEST(SpanCorruption, PaperExampleByHand) {
  // Noise: "for inviting" and "last", as in the paper's figure.
  const std::vector<bool> noise{false, false, true, true, false, false, false, false, true, false, false};
  const auto ex = apply_span_corruption(paper_text(), noise, kS0, kEos);
  // Thank you <S0> me to your party <S1> week . </s>
  EXPECT_EQ(ex.input, (std::vector<int64_t>{10, 11, kS0, 14, 15, 16, 17, kS0 + 1, 19, 20, kEos}));
  // <S0> for inviting <S1> last </s>
  EXPECT_EQ(ex.target, (std::vector<int64_t>{kS0, 12, 13, kS0 + 1, 18, kEos}));
  EXPECT_DOUBLE_EQ(ex.kept, 8.0 / 11.0);
  // A span at the start and one at the end; adjacent noise pieces are one span.
  const auto ends = apply_span_corruption({5, 6, 7, 8, kEos}, {true, false, true, true}, kS0, kEos);
  EXPECT_EQ(ends.input, (std::vector<int64_t>{kS0, 6, kS0 + 1, kEos}));
  EXPECT_EQ(ends.target, (std::vector<int64_t>{kS0, 5, kS0 + 1, 7, 8, kEos}));
  // No eos at the end: the same; one piece: all of it is the span; nothing: eos alone.
  EXPECT_EQ(apply_span_corruption({5, 6}, {false, true}, kS0, kEos).input, (std::vector<int64_t>{5, kS0, kEos}));
  SplitMix r1(1);
  const auto one = apply_span_corruption({5, kEos}, span_noise_mask(1, 0.15, 3, r1), kS0, kEos);
  EXPECT_EQ(one.input, (std::vector<int64_t>{kS0, kEos}));
  EXPECT_EQ(one.target, (std::vector<int64_t>{kS0, 5, kEos}));
  const auto none = apply_span_corruption({kEos}, {}, kS0, kEos);
  EXPECT_EQ(none.input, (std::vector<int64_t>{kEos}));
  EXPECT_EQ(none.target, (std::vector<int64_t>{kEos}));
  EXPECT_THROW(apply_span_corruption({5, 6, kEos}, {true}, kS0, kEos), Error);
}

TEST(SpanCorruption, MaskHasT5sCountsAndShape) {
  // T5's counts: noise = round(n · 0.15) (at least 1), spans = round(noise / 3) (at least 1).
  EXPECT_EQ(span_count(11, 0.15, 3), 1);   // 2 noise pieces
  EXPECT_EQ(span_count(31, 0.15, 3), 2);   // 5 noise pieces
  EXPECT_EQ(span_count(100, 0.15, 3), 5);  // 15
  EXPECT_EQ(span_count(2, 0.5, 1), 1);     // at most as many spans as kept pieces
  std::set<std::vector<bool>> seen;
  for (int64_t n = 2; n <= 40; ++n) {
    for (uint64_t seed = 0; seed < 30; ++seed) {
      SplitMix rng(seed * 977 + n);
      const auto m = span_noise_mask(n, 0.15, 3, rng);
      ASSERT_EQ(int64_t(m.size()), n);
      const int64_t noise = std::count(m.begin(), m.end(), true);
      EXPECT_EQ(noise, std::clamp<int64_t>(std::llround(n * 0.15), 1, n - 1)) << "n " << n;
      const auto r = runs(m);
      EXPECT_FALSE(r.front().first) << "a kept run first";
      EXPECT_TRUE(r.back().first) << "a noise run last";
      EXPECT_EQ(int64_t(r.size()), 2 * span_count(n, 0.15, 3)) << "n " << n;
      if (n == 30) seen.insert(m);
    }
  }
  EXPECT_GT(seen.size(), 10u) << "the spans' places vary with the seed";
  // With mean span 1 at density 0.5 the runs alternate and still cover the text.
  SplitMix rng(3);
  const auto m = span_noise_mask(10, 0.5, 1, rng);
  EXPECT_EQ(runs(m).size(), 10u);
}

TEST(SpanCorruption, ObjectiveIsKeyedAndLosesNothing) {
  auto cfg = pretrain_config();
  cfg.set("pretrain.max_length=32", "test");
  cfg.set("pretrain.noise_density=0.15", "test");
  cfg.set("pretrain.sentinels=2", "test");
  const auto obj = pretrain_objective(cfg, kS0, kEos);
  EXPECT_EQ(obj.extra_vocab, 2);
  EXPECT_EQ(obj.final_name, "t5");
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 31; ++i) ids.push_back(10 + i);
  ids.push_back(kEos);
  const auto a = obj.make(ids, 7, 3), b = obj.make(ids, 7, 3);
  EXPECT_EQ(a.input, b.input);
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(reassemble(a), ids);
  EXPECT_EQ(std::count_if(a.input.begin(), a.input.end(), [](int64_t t) { return t >= kS0; }), 2);
  std::set<std::vector<int64_t>> inputs;
  for (int64_t row = 0; row < 20; ++row) {
    const auto ex = obj.make(ids, 7, row);
    EXPECT_EQ(reassemble(ex), ids);
    inputs.insert(ex.input);
  }
  EXPECT_GT(inputs.size(), 10u);
  // 31 pieces make 2 spans: one sentinel is too few, refused naming the key.
  cfg.set("pretrain.sentinels=1", "test");
  try {
    pretrain_objective(cfg, kS0, kEos);
    FAIL() << "one sentinel accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pretrain.sentinels 1 is too few"), std::string::npos) << e.what();
  }
}

// Resume is bitwise; the final T5 loads into an inverter and a corrector, every tensor accounted for.
TEST(Pretrain, ResumeIsBitwiseAndLoadsIntoInverterAndCorrector) {
  const std::string dir = (fs::temp_directory_path() / ("daei-pretrain-" + std::to_string(getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  LocalCommunicator one;
  auto data = test::toy_dataset(test::toy_texts(48), 16, 0.04);
  const auto cfg = pretrain_config();
  auto tok = run_tokenizer(cfg, one, dir, *data);
  const int64_t V = tok->vocab_size();
  auto stage = [&](const Config& c, const std::string& at, bool resume) {
    LmStage s(c, one, at, texts_of(data), tok, resume, false, pretrain_objective(c, V, tok->eos_id()));
    s.enable_heldout(c, one, texts_of(data));
    return s.run();
  };
  ASSERT_EQ(stage(cfg, dir + "/a", false), kExitOk);
  auto c2 = cfg;
  c2.set("train.stop_after=3", "test");
  ASSERT_EQ(stage(c2, dir + "/b", false), kExitStopped);
  ASSERT_EQ(stage(cfg, dir + "/b", true), kExitOk);
  const std::string a = RunLayout(dir).final_module("a", "t5");
  EXPECT_EQ(test::max_diff_files(a + "/model.safetensors", RunLayout(dir).final_module("b", "t5") + "/model.safetensors"),
            0.0);
  EXPECT_NE(read_file(dir + "/a/metrics.jsonl").find("heldout_ce"), std::string::npos);
  const auto saved = load_safetensors(a + "/model.safetensors");
  ASSERT_EQ(saved.at("shared.weight").size(0), V + 4);

  // Every tensor of `t5` equals the checkpoint's (token rows cut to V); `others` (not T5) are left as they were.
  auto check = [&](T5ModelImpl& t5, const PretrainedLoad& r) {
    std::set<std::string> reported(r.copied.begin(), r.copied.end());
    reported.insert(r.cut.begin(), r.cut.end());
    std::set<std::string> in_file;
    for (const auto& [k, v] : saved) in_file.insert(k);
    EXPECT_EQ(reported, in_file) << "every tensor of the checkpoint is reported";
    EXPECT_EQ(r.cut, (std::vector<std::string>{"shared.weight"}));
    int64_t n = 0;
    for (const auto& p : t5.named_parameters(true)) {
      ++n;
      auto want = saved.at(p.key());
      if (p.key() == "shared.weight") want = want.narrow(0, 0, V);
      EXPECT_TRUE(torch::equal(p.value(), want)) << p.key();
    }
    EXPECT_EQ(n, int64_t(in_file.size())) << "every tensor of the model came from the checkpoint";
  };
  torch::manual_seed(test::seed(0));
  auto inv = make_inverter(cfg, 16, V);
  const auto projection = inv->embedding_transform->parameters()[0].clone();
  check(*inv->t5, load_pretrained_t5(*inv->t5, a));
  EXPECT_TRUE(torch::equal(inv->embedding_transform->parameters()[0], projection)) << "the projection stays fresh";

  CorrectorConfig cc;
  cc.dim = 16;
  cc.repeat = cfg.integer("inverter.repeat_tokens");
  cc.t5 = inverter_config(cfg, 16, V).t5;
  Corrector cor(cc);
  const auto ln = cor->layernorm->weight.clone();
  check(*cor->t5, load_pretrained_t5(*cor->t5, a));
  EXPECT_TRUE(torch::equal(cor->layernorm->weight, ln));

  // Another shape or another tokenizer is refused, naming the folder.
  auto wide = cfg;
  wide.set("inverter.d_ff=48", "test");
  auto other = make_inverter(wide, 16, V);
  try {
    load_pretrained_t5(*other->t5, a);
    FAIL() << "a T5 of another shape accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not the shape of this model"), std::string::npos) << e.what();
  }
  auto small = make_inverter(cfg, 16, V - 1);
  EXPECT_THROW(load_pretrained_t5(*small->t5, a), Error);
  EXPECT_THROW(load_pretrained_t5(*inv->t5, dir + "/a"), Error);  // not a final/t5 folder
  fs::remove_all(dir);
}
