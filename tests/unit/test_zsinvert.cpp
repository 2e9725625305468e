// Issue 23: the ZSInvert baseline. The search (the beam ranks by the black box's cosine alone, whatever the LM
// prefers; the query count; same seed, same output; the repetition penalty), the T5 generator's next-token scores,
// and the lm stage that trains it (the keyed corruption of its inputs; resume is bitwise).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "../support/temp_dir.h"
#include "../support/tiny_t5.h"
#include "../support/toy_run.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/rng.h"
#include "data/run_layout.h"
#include "dist/communicator.h"
#include "eval/zsinvert.h"
#include "model/release/embedder.h"
#include "model/net/generate.h"
#include "model/net/t5.h"
#include "model/text/tokenizer_spm.h"
#include "stages/recipes/lm.h"
#include "stages/recipes/stage2.h"
#include "stages/loop/trainer.h"
#include "../support/test_seed.h"

using namespace daei;
namespace fs = std::filesystem;

namespace {

// --- A rigged world: ids 0 pad, 1 eos, 2..9 words; a text's embedding is its normalised bag of one-hot words. -----
const std::vector<std::string> kVocab = {"<pad>", "</s>", "the", "cat", "sat", "mat", "red", "ran", "far", "dog"};
constexpr int64_t kV = 10;

std::string words_of(const std::vector<int64_t>& ids) {
  std::string s;
  for (auto t : ids)
    if (t >= 2) s += (s.empty() ? "" : " ") + kVocab[t];
  return s;
}

at::Tensor bag(const std::string& text) {
  auto e = torch::zeros({kV});
  std::istringstream in(text);
  std::string w;
  while (in >> w)
    for (int64_t t = 2; t < kV; ++t)
      if (kVocab[t] == w) e[t] += 1;
  return e;
}

// The black box without noise, counting the queries (and keys) it answers.
struct CountingBox {
  std::vector<std::string> keys, texts;
  QueryFn fn() {
    return [this](const std::vector<std::string>& t, const std::vector<std::string>& k) {
      keys.insert(keys.end(), k.begin(), k.end());
      texts.insert(texts.end(), t.begin(), t.end());
      std::vector<at::Tensor> rows;
      for (const auto& x : t) rows.push_back(bag(x));
      return torch::stack(rows);
    };
  }
};

// An LM that always prefers "dog" (9), then "far", "ran", ... and likes "cat" (3) and "sat" (4) least; it records
// the prefixes it is asked about, step by step.
struct RiggedLm {
  std::vector<std::vector<std::vector<int64_t>>> calls;  // per call, its prefixes
  std::vector<std::vector<std::string>> enc;             // per call, its encoder texts
  ZsGenerator gen() {
    ZsGenerator g;
    g.decode = words_of;
    g.next = [this](const std::vector<std::vector<int64_t>>& p, const std::vector<std::string>& e) {
      calls.push_back(p);
      enc.push_back(e);
      auto s = torch::empty({int64_t(p.size()), kV});
      for (int64_t i = 0; i < int64_t(p.size()); ++i)
        for (int64_t t = 0; t < kV; ++t) s[i][t] = -0.1 * double(kV - t);  // 9 best, 2 worst among words
      for (int64_t i = 0; i < int64_t(p.size()); ++i) {
        s[i][3] = -5.0;
        s[i][4] = -6.0;
        s[i][1] = 0.0;  // EOS the most likely of all: must never be proposed
        s[i][0] = 0.0;
      }
      return torch::log_softmax(s, 1);
    };
    return g;
  }
};

DenoiseFn identity() {
  return [](const at::Tensor& x) { return x; };
}

ZsInvertOptions small_opts(int64_t beam, int64_t k, int64_t steps, bool refine) {
  ZsInvertOptions o;
  o.beam = beam;
  o.top_k = k;
  o.max_steps = steps;
  o.refine = refine;
  o.progress_every_s = 1000;
  return o;
}

// --- The tiny real generator: a 40-piece SentencePiece model and a T5 with seeded random weights. ----------------

std::shared_ptr<SpmTokenizer> tokenizer() {
  static TempDir dir("zs-spm");
  static std::shared_ptr<SpmTokenizer> tok = [] {
    {
      std::ofstream out(dir.p / "corpus.txt");
      for (const auto& t : test::toy_texts(400)) out << t << "\n";
    }
    SpmTokenizer::train((dir.p / "corpus.txt").string(), 40, (dir.p / "spm").string());
    return std::make_shared<SpmTokenizer>((dir.p / "spm.model").string());
  }();
  return tok;
}

std::shared_ptr<T5ModelImpl> tiny_t5(uint64_t seed = 5) {
  torch::manual_seed(test::seed(seed));
  auto m = std::make_shared<T5ModelImpl>(test::tiny_t5_config());
  m->eval();
  return m;
}

// Hashed word counts, L2-normalised: a deterministic clean embedder for the noisy black box.
class HashEmbedder final : public Embedder {
 public:
  int64_t dim() const override { return 16; }
  std::string id() const override { return "hash-16"; }
  at::Tensor embed(const std::vector<std::string>& texts) const override {
    auto out = torch::zeros({int64_t(texts.size()), 16});
    for (size_t i = 0; i < texts.size(); ++i) {
      std::istringstream in(texts[i]);
      std::string w;
      while (in >> w) {
        const uint64_t h = hash_key(w);
        out[i][int64_t(h % 16)] += (h >> 20) % 2 ? 1.0 : -1.0;
        out[i][int64_t((h >> 8) % 16)] += 0.5;
      }
      auto n = out[i].norm();
      if (n.item<float>() > 0) out[i] /= n;
    }
    return out;
  }
};

}  // namespace

// ----------------------------------------------------------------------------------------------------------------
// The search

TEST(ZsInvert, BeamKeepsTheBestByCosineAndIgnoresTheLmScores) {
  RiggedLm lm;
  CountingBox box;
  const auto y = torch::stack({bag("cat sat")});
  auto r = run_zsinvert(y, {"t/0"}, box.fn(), identity(), lm.gen(), small_opts(2, 8, 3, false));
  ASSERT_EQ(lm.calls.size(), 3u);  // one LM call a step (2 prefixes fit in one lm_batch)
  // Step 1 expands the empty prefix; EOS and pad are never proposed, so all 8 words are candidates.
  EXPECT_EQ(lm.calls[0], (std::vector<std::vector<int64_t>>{{}}));
  for (const auto& t : box.texts) EXPECT_FALSE(t.empty());
  // Step 2 expands the two texts of best cosine, "cat" and "sat" (0.707 each; every other word 0), although the LM
  // ranks them last and "dog" first.
  std::set<std::vector<int64_t>> step2(lm.calls[1].begin(), lm.calls[1].end());
  EXPECT_EQ(step2, (std::set<std::vector<int64_t>>{{3}, {4}}));
  // Step 3 expands the two texts of cosine 1 ("cat sat", "sat cat").
  std::set<std::vector<int64_t>> step3(lm.calls[2].begin(), lm.calls[2].end());
  EXPECT_EQ(step3, (std::set<std::vector<int64_t>>{{3, 4}, {4, 3}}));
  EXPECT_NEAR(r.best_cos[0], 1.0, 1e-6);
  EXPECT_TRUE(r.best_text[0] == "cat sat" || r.best_text[0] == "sat cat") << r.best_text[0];
  EXPECT_EQ(r.best_text[0].find("dog"), std::string::npos);
  // Stage A's encoder input is the empty text.
  for (const auto& e : lm.enc)
    for (const auto& t : e) EXPECT_EQ(t, "");
}

// Issue 34: with the naturalness term, a candidate the LM finds unlikely (a piece that is not a word) loses to one
// that reads, though its cosine is a little higher; at weight 0 (ZSInvert's ranking) the cosine alone decides.
TEST(ZsInvert, NaturalnessTermLetsAReadableCandidateBeatAJunkOneOfSlightlyHigherCosine) {
  // The black box: "far" (the junk) lies on the target, "cat" at cosine 0.99, everything else orthogonal.
  const QueryFn box = [](const std::vector<std::string>& t, const std::vector<std::string>&) {
    auto e = torch::zeros({int64_t(t.size()), 3});
    for (int64_t i = 0; i < int64_t(t.size()); ++i) {
      if (t[size_t(i)] == "far") e[i][0] = 1.0;
      else if (t[size_t(i)] == "cat") e[i][0] = 0.99, e[i][1] = std::sqrt(1 - 0.99 * 0.99);
      else e[i][2] = 1.0;
    }
    return e;
  };
  // The LM: "cat" (3) likely, "far" (8) very unlikely, the other words in between.
  ZsGenerator lm;
  lm.decode = words_of;
  lm.next = [](const std::vector<std::vector<int64_t>>& p, const std::vector<std::string>&) {
    auto s = torch::full({int64_t(p.size()), kV}, -2.0);
    s.select(1, 3).fill_(2.0);
    s.select(1, 8).fill_(-6.0);
    return torch::log_softmax(s, 1);
  };
  const auto y = torch::tensor({1.0f, 0.0f, 0.0f}).view({1, 3});
  auto opt = small_opts(1, 8, 1, false);
  auto plain = run_zsinvert(y, {"t/0"}, box, identity(), lm, opt);
  EXPECT_EQ(plain.best_text[0], "far");
  EXPECT_NEAR(plain.best_cos[0], 1.0, 1e-6);
  opt.naturalness = 0.05;  // log p("cat") ≈ -0.0165, log p("far") ≈ -8.02: 0.99 - 0.0008 > 1.0 - 0.40
  auto natural = run_zsinvert(y, {"t/0"}, box, identity(), lm, opt);
  EXPECT_EQ(natural.best_text[0], "cat");
  EXPECT_NEAR(natural.best_cos[0], 0.99, 1e-6);  // best_cos stays the chosen text's cosine
  EXPECT_DOUBLE_EQ(naturalness_term(0.05, -4.0, 2), -0.1);
  EXPECT_DOUBLE_EQ(naturalness_term(0.0, -4.0, 2), 0.0);
}

TEST(ZsInvert, RefinementIsSeededWithTheBestText) {
  RiggedLm lm;
  CountingBox box;
  const auto y = torch::stack({bag("cat sat")});
  auto r = run_zsinvert(y, {"t/0"}, box.fn(), identity(), lm.gen(), small_opts(2, 8, 2, true));
  ASSERT_EQ(lm.calls.size(), 4u);  // 2 steps of stage A, 2 of stage B
  EXPECT_EQ(lm.calls[2], (std::vector<std::vector<int64_t>>{{}}));  // stage B restarts from the empty prefix
  for (size_t c = 2; c < 4; ++c)
    for (const auto& t : lm.enc[c]) EXPECT_TRUE(t == "cat sat" || t == "sat cat") << t;
  EXPECT_NEAR(r.best_cos[0], 1.0, 1e-6);
  EXPECT_NEAR(r.stage_a_cos[0], 1.0, 1e-6);
}

TEST(ZsInvert, QueryCountIsBeamTimesKPerStepPlusTheRefinementRound) {
  RiggedLm lm;
  CountingBox box;
  auto opt = small_opts(2, 4, 3, true);
  opt.text_batch = 2;   // three texts: two groups
  opt.embed_chunk = 5;  // chunks cross candidates and texts
  opt.lm_batch = 3;
  const auto y = torch::stack({bag("cat sat"), bag("red dog ran"), bag("the mat")});
  auto r = run_zsinvert(y, {"a", "b", "c"}, box.fn(), identity(), lm.gen(), opt);
  // Per stage: step 1 expands the one empty prefix (k queries), every later step beam × k; then stage B again.
  const int64_t per_stage = 4 + (3 - 1) * 2 * 4;
  EXPECT_EQ(zsinvert_queries_per_text(opt, kV), 2 * per_stage);
  for (auto q : r.queries_per_text) EXPECT_EQ(q, 2 * per_stage);
  EXPECT_EQ(int64_t(box.keys.size()), 3 * 2 * per_stage);  // what the black box answered: nothing uncounted
  // Every query has its own noise key, disjoint from cache, hypothesis and correction keys.
  std::set<std::string> keys(box.keys.begin(), box.keys.end());
  EXPECT_EQ(keys.size(), box.keys.size());
  for (const auto& k : box.keys) EXPECT_EQ(k.rfind("zs/", 0), 0u) << k;
  EXPECT_TRUE(keys.count("zs/b/sB3/c7"));
  EXPECT_EQ(zsinvert_query_key("test/4", 'A', 12, 3), "zs/test/4/sA12/c3");
  // Without refinement, half.
  CountingBox box2;
  RiggedLm lm2;
  auto r2 = run_zsinvert(y, {"a", "b", "c"}, box2.fn(), identity(), lm2.gen(), small_opts(2, 4, 3, false));
  for (auto q : r2.queries_per_text) EXPECT_EQ(q, per_stage);
  // The defaults: 50 + 19·5·50 = 4800 a stage.
  EXPECT_EQ(zsinvert_queries_per_text(ZsInvertOptions{}, 8000), 2 * 4800);
}

TEST(ZsInvert, RepetitionPenaltyFollowsHuggingFace) {
  auto s = torch::tensor({-1.0f, 2.0f, -3.0f, 4.0f}).view({1, 4});
  apply_repetition_penalty(s, {{1, 2, 2}}, 1.5);
  EXPECT_FLOAT_EQ(s[0][0].item<float>(), -1.0f);
  EXPECT_FLOAT_EQ(s[0][1].item<float>(), 2.0f / 1.5f);
  EXPECT_FLOAT_EQ(s[0][2].item<float>(), -4.5f);  // once, though it occurs twice
  EXPECT_FLOAT_EQ(s[0][3].item<float>(), 4.0f);
}

TEST(ZsInvert, T5GeneratorScoresAreTheModelsLastPositionLogProbs) {
  auto t5 = tiny_t5();
  auto tok = tokenizer();
  auto g = t5_generator(t5, tok, 16);
  const std::vector<std::vector<int64_t>> prefixes{{}, {5, 7}, {9}};
  const std::vector<std::string> enc{"", "the cat sat", ""};
  auto lp = g.next(prefixes, enc);
  ASSERT_EQ(lp.dim(), 2);
  ASSERT_EQ(lp.size(0), 3);
  ASSERT_EQ(lp.size(1), 40);
  torch::NoGradGuard ng;
  for (int64_t i = 0; i < 3; ++i) {
    auto eb = tok->encode_batch({enc[i]}, 16);
    auto h = t5->encode_ids(eb.input_ids, eb.attention_mask);
    std::vector<int64_t> d{0};
    d.insert(d.end(), prefixes[i].begin(), prefixes[i].end());
    auto logits = t5->decode(torch::tensor(d, torch::kLong).view({1, -1}), h, eb.attention_mask);
    auto want = torch::log_softmax(logits[0][int64_t(d.size()) - 1], 0);
    EXPECT_LT((lp[i] - want).abs().max().item<double>(), 1e-5) << i;
  }
}

TEST(ZsInvert, SameSeedSameOutputWhateverTheBatching) {
  auto t5 = tiny_t5();
  auto tok = tokenizer();
  auto gen = t5_generator(t5, tok, 16);
  auto run = [&](uint64_t noise_seed, int64_t text_batch, int64_t chunk) {
    auto box = std::make_shared<NoisyEmbedder>(std::make_shared<HashEmbedder>(), 0.05, noise_seed);
    QueryFn q = [box](const std::vector<std::string>& t, const std::vector<std::string>& k) { return box->embed(t, k); };
    auto texts = test::toy_texts(3, 17);
    const auto y = box->embed(texts, {"test/0", "test/1", "test/2"});
    auto o = small_opts(2, 4, 3, true);
    o.text_batch = text_batch;
    o.embed_chunk = chunk;
    return run_zsinvert(y, {"test/0", "test/1", "test/2"}, q, identity(), gen, o);
  };
  auto a = run(11, 16, 1024), b = run(11, 16, 1024), c = run(11, 1, 7), d = run(12, 16, 1024);
  EXPECT_EQ(a.best_text, b.best_text);
  EXPECT_EQ(a.best_cos, b.best_cos);
  EXPECT_EQ(a.best_text, c.best_text);  // the noise is keyed by text and candidate, not by batch
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(a.best_cos[i], c.best_cos[i], 1e-6);
  EXPECT_NE(a.best_cos, d.best_cos);  // another noise seed: other draws
  for (auto q : a.queries_per_text) EXPECT_EQ(q, zsinvert_queries_per_text(small_opts(2, 4, 3, true), 40));
}

TEST(ZsInvert, ShieldIsAppliedToTargetAndCandidates) {
  // Target "the dog": unshielded, "dog" and "the" tie (0.707) and the earlier candidate, "dog" (the LM's first),
  // wins; a shield that keeps only the "the" coordinate makes "the" the one answer (cos 1, "dog" 0).
  const auto y = torch::stack({bag("the dog")});
  {
    RiggedLm lm;
    CountingBox box;
    auto r = run_zsinvert(y, {"t/0"}, box.fn(), identity(), lm.gen(), small_opts(1, 8, 1, false));
    EXPECT_EQ(r.best_text[0], "dog");
  }
  RiggedLm lm;
  CountingBox box;
  DenoiseFn keep_the = [](const at::Tensor& x) {
    auto m = torch::zeros({kV});
    m[2] = 1;
    return x * m;
  };
  auto r = run_zsinvert(y, {"t/0"}, box.fn(), keep_the, lm.gen(), small_opts(1, 8, 1, false));
  EXPECT_EQ(r.best_text[0], "the");
  EXPECT_NEAR(r.best_cos[0], 1.0, 1e-6);
}

// ----------------------------------------------------------------------------------------------------------------
// The lm stage

TEST(ZsInvertLm, CorruptionDropsByTheKeyedStream) {
  const std::vector<int64_t> ids{5, 6, 7, 8, 9, 10, 1};
  {
    SplitMix r(42);  // its uniforms: 0.155, 0.743, 0.638, 0.660, 0.204, 0.131 (computed by hand in Python)
    EXPECT_EQ(drop_pieces(ids, 0.5, r, 1), (std::vector<int64_t>{6, 7, 8, 1}));
  }
  {
    SplitMix r(42);
    EXPECT_EQ(drop_pieces(ids, 0.7, r, 1), (std::vector<int64_t>{6, 1}));
  }
  {
    SplitMix r(42);
    EXPECT_EQ(drop_pieces(ids, 1.0, r, 1), (std::vector<int64_t>{1}));  // rate 1: the empty text
    SplitMix r0(42);
    EXPECT_EQ(drop_pieces(ids, 0.0, r0, 1), ids);
  }
  // An example's rate and drops depend on (seed, step, row) alone.
  auto a = lm_corrupt(ids, 1234, 7, 3, 0.15, 1.0, 1), b = lm_corrupt(ids, 1234, 7, 3, 0.15, 1.0, 1);
  EXPECT_EQ(a.input, b.input);
  EXPECT_EQ(a.rate, b.rate);
  EXPECT_GE(a.rate, 0.15);
  EXPECT_LT(a.rate, 1.0);
  EXPECT_EQ(lm_corrupt(ids, 1234, 7, 3, 1.0, 1.0, 1).input, (std::vector<int64_t>{1}));
  SplitMix r(lm_example_key(1234, 7, 3));
  const double rate = 0.15 + 0.85 * r.uniform();
  EXPECT_EQ(rate, a.rate);
  EXPECT_EQ(drop_pieces(ids, rate, r, 1), a.input);
  std::set<double> rates;
  for (int64_t step = 0; step < 20; ++step) rates.insert(lm_corrupt(ids, 1234, step, 3, 0.15, 1.0, 1).rate);
  EXPECT_GT(rates.size(), 15u);
}

TEST(ZsInvertLm, ResumeIsBitwiseAndFinalIsAHuggingFaceT5) {
  const std::string dir = (fs::temp_directory_path() / ("daei-zs-lm-" + std::to_string(getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  LocalCommunicator one;
  auto data = test::toy_dataset(test::toy_texts(48), 16, 0.04);
  auto cfg = test::toy_config(6, 8);
  for (const std::string s : {"lm.steps=6", "lm.batch_size=8", "lm.warmup_steps=2", "lm.max_length=16",
                              "lm.eval_every=3", "train.heldout_rows=8", "inverter.dropout=0.1"})
    cfg.set(s, "test");
  auto tok = run_tokenizer(cfg, one, dir, *data);
  LmTrainData d;
  d.rows = data->size();
  d.texts = [data](const std::vector<int64_t>& rows) { return data->texts(rows); };
  {
    LmStage s(cfg, one, dir + "/a", d, tok, false, false);
    s.enable_heldout(cfg, one, d);
    ASSERT_EQ(s.run(), kExitOk);
  }
  {
    auto c2 = cfg;
    c2.set("train.stop_after=3", "test");
    LmStage s(c2, one, dir + "/b", d, tok, false, false);
    s.enable_heldout(c2, one, d);
    ASSERT_EQ(s.run(), kExitStopped);
  }
  {
    LmStage s(cfg, one, dir + "/b", d, tok, true, false);
    s.enable_heldout(cfg, one, d);
    ASSERT_EQ(s.run(), kExitOk);
  }
  EXPECT_EQ(test::max_diff_files(dir + "/a/final/lm/model.safetensors", dir + "/b/final/lm/model.safetensors"), 0.0);
  EXPECT_TRUE(RunLayout(dir).stage_complete("a"));
  EXPECT_EQ(RunLayout(dir).final_module("a", "lm"), dir + "/a/final/lm");
  auto m = T5ModelImpl::from_pretrained(RunLayout(dir).final_module("a", "lm"));
  EXPECT_EQ(m->cfg.d_model, 32);
  EXPECT_EQ(m->cfg.vocab_size, tok->vocab_size());
  EXPECT_TRUE(file_exists(dir + "/a/final/lm/training.json"));
  EXPECT_NE(read_file(dir + "/a/metrics.jsonl").find("heldout_ce"), std::string::npos);
  fs::remove_all(dir);
}
