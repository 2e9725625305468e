// Issue 12: the corrector (input layout, mask, save/load) and DAEI's iterative correction (stopping rule, distinct
// beam, query accounting, chunked embedding). Fixtures: tests/support/corrector_fixtures.h.
#include "../support/corrector_fixtures.h"
#include "../support/test_seed.h"
#include "cli/config_guard.h"
#include "core/config.h"
#include "data/eval_split.h"
#include "eval/evaluate.h"
#include "stages/recipes/stage4.h"

using namespace daei;
using namespace daei::corrector_test;
namespace fs = std::filesystem;


// ----------------------------------------------------------------------------------------------------------------
// The corrector

TEST(Corrector, InputLayoutAndMask) {
  auto m = tiny_corrector();
  torch::NoGradGuard ng;
  const int64_t B = 3, R = kRepeat;
  auto e = torch::randn({B, kDim}), h = torch::randn({B, kDim});
  auto ids = hyp_ids({"the cat sat", "a dog ran far away from home", "red"});
  const int64_t L = ids.size(1);
  ASSERT_GT(L, 3);
  auto [x, mask] = m->encoder_inputs(e, h, ids);
  const int64_t P = 4 + 3 * R;
  EXPECT_EQ(m->prefix_length(), P);
  ASSERT_EQ(x.sizes(), torch::IntArrayRef({B, P + L, 32}));
  ASSERT_EQ(mask.sizes(), torch::IntArrayRef({B, P + L}));
  // Mask: ones over the prefix, then the hypothesis' real tokens (pad masked; eos kept).
  EXPECT_TRUE(torch::equal(mask.slice(1, 0, P), torch::ones({B, P}, torch::kLong)));
  EXPECT_TRUE(torch::equal(mask.slice(1, P), (ids != 0).to(torch::kLong)));
  EXPECT_EQ(mask[2].sum().item<int64_t>(), P + int64_t(tokenizer().encode("red", 16).size()));
  // Layout, rebuilt by hand: [eos, T1(e)×R, eos, T3(h)×R, eos, T2(e−h)×R, eos, tokens], LayerNorm over every position.
  auto ln = [&](const at::Tensor& t) { return m->layernorm->forward(t); };
  auto sep = ln(m->t5->embed(torch::full({1}, 1, torch::kLong)))[0];
  auto t1 = ln(m->embedding_transform_1->forward(e));
  auto t2 = ln(m->embedding_transform_2->forward(e - h));
  auto t3 = ln(m->embedding_transform_3->forward(h));
  auto tok = ln(m->t5->embed(ids));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t p : {int64_t(0), 1 + R, 2 + 2 * R, 3 + 3 * R}) EXPECT_TRUE(torch::allclose(x[b][p], sep)) << p;
    EXPECT_TRUE(torch::allclose(x[b].slice(0, 1, 1 + R), t1[b]));
    EXPECT_TRUE(torch::allclose(x[b].slice(0, 2 + R, 2 + 2 * R), t3[b]));
    EXPECT_TRUE(torch::allclose(x[b].slice(0, 3 + 2 * R, 3 + 3 * R), t2[b]));
    EXPECT_TRUE(torch::allclose(x[b].slice(0, P), tok[b]));
  }
  // The three transforms are separate modules with their own weights.
  EXPECT_FALSE(torch::allclose(t1, t3));
  // Padding changes nothing: a row with extra pad positions gives the same loss and the same generation.
  auto labels = labels_from_rows({tokenizer().encode("the cat sat on a mat", 16)});
  auto one = hyp_ids({"the cat sat"});
  auto padded = torch::cat({one, torch::zeros({1, 4}, torch::kLong)}, 1);
  auto l1 = m->loss(e.slice(0, 0, 1), h.slice(0, 0, 1), one, labels);
  auto l2 = m->loss(e.slice(0, 0, 1), h.slice(0, 0, 1), padded, labels);
  EXPECT_EQ(l1.count, int64_t(tokenizer().encode("the cat sat on a mat", 16).size()));
  EXPECT_NEAR(l1.sum.item<double>(), l2.sum.item<double>(), 1e-5);
  GenerateOptions g;
  g.max_length = 10;
  auto g1 = m->generate(e.slice(0, 0, 1), h.slice(0, 0, 1), one, g);
  auto g2 = m->generate(e.slice(0, 0, 1), h.slice(0, 0, 1), padded, g);
  EXPECT_TRUE(torch::equal(g1.sequences, g2.sequences));
  // Bad shapes are refused with a message.
  EXPECT_THROW(m->encoder_inputs(torch::randn({B, kDim + 1}), h, ids), Error);
  EXPECT_THROW(m->encoder_inputs(e, h, ids.slice(0, 0, 2)), Error);
}

TEST(Corrector, LossTrainsAndBeamReturnsS) {
  auto m = tiny_corrector();
  m->train();
  auto e = torch::randn({2, kDim}), h = torch::randn({2, kDim});
  auto ids = hyp_ids({"the cat", "a dog"});
  auto labels = labels_from_rows({tokenizer().encode("the cat sat", 16), tokenizer().encode("a dog ran far", 16)});
  auto l = m->loss(e, h, ids, labels);
  (l.sum / l.count).backward();
  for (const auto* name : {"embedding_transform_1.net.0.weight", "embedding_transform_2.net.3.weight",
                           "embedding_transform_3.net.0.bias", "layernorm.weight", "t5.shared.weight"}) {
    auto p = m->named_parameters()[name];
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_GT(p.grad().abs().sum().item<double>(), 0) << name;
  }
  m->eval();
  GenerateOptions g;
  g.max_length = 8;
  g.num_beams = 3;
  g.num_return_sequences = 3;
  auto out = m->generate(e, h, ids, g);
  EXPECT_EQ(out.sequences.size(0), 6);
  EXPECT_EQ(out.scores.size(0), 6);
}

TEST(Corrector, SaveLoadRoundTrip) {
  TempDir dir("corrector-save");
  auto m = tiny_corrector(5);
  const std::string d = dir.str() + "/corrector";
  m->save(d);
  for (const char* f : {"config.json", "model.safetensors", "corrector_heads.safetensors", "corrector.json"})
    EXPECT_TRUE(file_exists(d + "/" + f)) << f;
  // vec2text's names for the heads; the T5 file is a plain Hugging Face T5 checkpoint.
  auto heads = load_safetensors(d + "/corrector_heads.safetensors");
  std::set<std::string> names;
  for (const auto& [k, v] : heads) names.insert(k);
  std::set<std::string> want;
  for (int i = 1; i <= 3; ++i)
    for (const char* s : {".0.weight", ".0.bias", ".3.weight", ".3.bias"})
      want.insert("embedding_transform_" + std::to_string(i) + s);
  want.insert("layernorm.weight");
  want.insert("layernorm.bias");
  EXPECT_EQ(names, want);
  EXPECT_EQ(heads.at("embedding_transform_2.3.weight").sizes(), torch::IntArrayRef({32 * kRepeat, kDim}));
  auto t5 = load_safetensors(d + "/model.safetensors");
  EXPECT_TRUE(t5.count("shared.weight"));
  EXPECT_TRUE(t5.count("encoder.block.0.layer.0.SelfAttention.q.weight"));

  auto back = CorrectorImpl::load(d);
  EXPECT_EQ(back->cfg.dim, kDim);
  EXPECT_EQ(back->cfg.repeat, kRepeat);
  torch::NoGradGuard ng;
  auto e = torch::randn({2, kDim}), h = torch::randn({2, kDim});
  auto ids = hyp_ids({"the cat", "a dog ran"});
  auto labels = labels_from_rows({tokenizer().encode("the cat sat", 16), tokenizer().encode("a dog", 16)});
  EXPECT_EQ(m->loss(e, h, ids, labels).sum.item<double>(), back->loss(e, h, ids, labels).sum.item<double>());
  GenerateOptions g;
  g.max_length = 10;
  g.num_beams = 2;
  g.num_return_sequences = 2;
  auto a = m->generate(e, h, ids, g), b = back->generate(e, h, ids, g);
  EXPECT_TRUE(torch::equal(a.sequences, b.sequences));
  EXPECT_TRUE(torch::equal(a.scores, b.scores));
  // A folder that is not a corrector is refused.
  EXPECT_THROW(CorrectorImpl::load(dir.str()), Error);
}

// Warm start (issue 21): the corrector's T5 and T1 are exactly the inverter's tensors (names, shapes, values);
// T2/T3 are copies of the inverter's transform or stay fresh; the LayerNorm stays fresh.
TEST(Corrector, WarmStartCopiesTheInvertersTensors) {
  Inverter inv = tiny_inverter();
  const InverterConfig ic = inv->cfg;
  const auto inv_t5 = inv->t5->named_parameters(true);
  const auto inv_tr = inv->embedding_transform->named_parameters(true);
  for (const bool copy_t2_t3 : {false, true}) {
    auto m = tiny_corrector(9);
    const at::Tensor fresh_t2 = m->embedding_transform_2->net[0]->as<torch::nn::Linear>()->weight.clone();
    const at::Tensor ln_w = m->layernorm->weight.clone();
    const auto copied = warm_start_corrector(*m, *inv, copy_t2_t3);
    // Every T5 tensor, by its Hugging Face name, and T1.
    const size_t want = inv_t5.size() + inv_tr.size() * (copy_t2_t3 ? 3 : 1);
    EXPECT_EQ(copied.size(), want);
    for (const auto& p : m->t5->named_parameters(true)) {
      const at::Tensor* src = inv_t5.find(p.key());
      ASSERT_NE(src, nullptr) << p.key();
      EXPECT_EQ(p.value().sizes(), src->sizes()) << p.key();
      EXPECT_TRUE(torch::equal(p.value(), *src)) << p.key();
      EXPECT_NE(std::find(copied.begin(), copied.end(), "t5." + p.key()), copied.end()) << p.key();
    }
    for (const auto& p : m->embedding_transform_1->named_parameters(true))
      EXPECT_TRUE(torch::equal(p.value(), *inv_tr.find(p.key()))) << p.key();
    const at::Tensor t2 = m->embedding_transform_2->net[0]->as<torch::nn::Linear>()->weight;
    const at::Tensor inv_w = inv->embedding_transform->net[0]->as<torch::nn::Linear>()->weight;
    EXPECT_EQ(torch::equal(t2, inv_w), copy_t2_t3);
    EXPECT_EQ(torch::equal(t2, fresh_t2), !copy_t2_t3);
    EXPECT_TRUE(torch::equal(m->layernorm->weight, ln_w));
    // Copies, not shared storage: training the corrector leaves the inverter as it was.
    EXPECT_NE(m->t5->shared->weight.data_ptr(), inv->t5->shared->weight.data_ptr());
  }
  // Another T5 size is refused with the tensor's name.
  T5Config other = tiny_t5();
  other.d_ff = 48;
  InverterConfig ic2 = ic;
  ic2.t5 = other;
  Inverter inv2(ic2);
  auto m = tiny_corrector(9);
  try {
    warm_start_corrector(*m, *inv2, false);
    FAIL() << "a mismatched inverter was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DenseReluDense"), std::string::npos) << e.what();
  }
}

// ----------------------------------------------------------------------------------------------------------------
// The correction rules

TEST(Correction, EarlyStopRule) {
  CorrectionOptions o;  // max_steps 10, min_gain 1e-3
  // DAEI's rule: round 1 is never judged against round 0; the first comparison is round 2 against round 1.
  EXPECT_FALSE(correction_should_stop(0.80, 0.70, 1, o));
  EXPECT_FALSE(correction_should_stop(0.80, 0.80, 1, o));
  EXPECT_FALSE(correction_should_stop(0.80, 0.81, 2, o));     // gain 1e-2: go on
  EXPECT_TRUE(correction_should_stop(0.80, 0.8005, 2, o));    // gain below the threshold
  EXPECT_TRUE(correction_should_stop(0.80, 0.80, 2, o));      // no gain
  EXPECT_TRUE(correction_should_stop(0.80, 0.70, 3, o));      // negative gain
  EXPECT_TRUE(correction_should_stop(0.80, 0.90, 10, o));     // max steps, whatever the gain
  EXPECT_FALSE(correction_should_stop(0.80, 0.90, 9, o));
  EXPECT_TRUE(correction_should_stop(0.80, std::nan(""), 2, o));
  o.max_steps = 1;  // a single round still ends at max_steps
  EXPECT_TRUE(correction_should_stop(0.80, 0.70, 1, o));
  o.max_steps = 10;
  o.min_gain = -0.5;  // a negative threshold still stops on any decrease
  EXPECT_TRUE(correction_should_stop(0.80, 0.79, 2, o));
  EXPECT_FALSE(correction_should_stop(0.80, 0.80, 2, o));
  o.early_stop = false;  // fixed number of rounds
  EXPECT_FALSE(correction_should_stop(0.80, 0.10, 3, o));
  EXPECT_TRUE(correction_should_stop(0.80, 0.10, 10, o));
}

TEST(Correction, EarlyStopRoundReplaysTheRule) {
  CorrectionOptions o;
  o.max_steps = 10;
  // Round 1 falls (not judged), round 2 gains, round 3 gains too little: the early-stopped run ends at round 3.
  EXPECT_EQ(early_stop_round({0.80, 0.78, 0.85, 0.8505, 0.90}, o), 3);
  EXPECT_EQ(early_stop_round({0.80, 0.81, 0.82, 0.83}, o), 3);  // never stopped: the last round run
  EXPECT_EQ(early_stop_round({0.80}, o), 0);
  o.max_steps = 2;
  EXPECT_EQ(early_stop_round({0.80, 0.81, 0.82, 0.83}, o), 2);
  o.max_steps = 10;
  o.early_stop = false;
  EXPECT_EQ(early_stop_round({0.80, 0.78, 0.70, 0.60}, o), 3);
}

TEST(Correction, BeamKeepsSBestDistinct) {
  std::vector<std::string> t = {"a", "b", "a", "c", "b", "d", "e"};
  std::vector<double> s = {0.9, 0.95, 0.97, 0.1, 0.95, 0.5, 0.96};
  EXPECT_EQ(top_distinct(t, s, 3), (std::vector<int64_t>{2, 6, 1}));  // "a" once, at its best; tie → earlier index
  EXPECT_EQ(top_distinct(t, s, 1), (std::vector<int64_t>{2}));
  EXPECT_EQ(top_distinct(t, s, 10), (std::vector<int64_t>{2, 6, 1, 5, 3}));  // only 5 distinct texts
  std::vector<std::string> same = {"x", "x", "x"};
  EXPECT_EQ(top_distinct(same, {0.1, 0.3, 0.2}, 3), (std::vector<int64_t>{1}));
  EXPECT_TRUE(top_distinct({}, {}, 3).empty());
  EXPECT_THROW(top_distinct(t, {0.1}, 2), Error);
}

TEST(Correction, QueryKeysAreDistinct) {
  std::set<std::string> keys;
  for (const char* id : {"test/1", "test/2", "test/12"})
    for (int r = 0; r < 12; ++r)
      for (int c = 0; c < 12; ++c) keys.insert(correction_query_key(id, r, c));
  EXPECT_EQ(keys.size(), 3u * 12 * 12);
  EXPECT_EQ(correction_query_key("test/7", 2, 5), "correct/test/7/r2/c5");
}

namespace {

// A black box that counts every text it is asked to embed, per text id, and remembers every key.
struct CountingBox {
  std::shared_ptr<NoisyEmbedder> emb = noisy_embedder();
  std::map<std::string, int64_t> per_id;
  std::vector<std::string> keys;
  int64_t calls = 0;
  size_t max_call = 0;
  QueryFn fn() {
    return [this](const std::vector<std::string>& t, const std::vector<std::string>& k) {
      ++calls;
      max_call = std::max(max_call, t.size());
      for (const auto& key : k) {
        // correct/<id>/r<t>/c<j>, ids of the form "test/N"
        const auto r = key.rfind("/r");
        per_id[key.substr(8, r - 8)]++;
        keys.push_back(key);
      }
      return emb->embed(t, k);
    };
  }
};

}  // namespace

TEST(Correction, QueryCountingIsExact) {
  auto m = lively_corrector();
  const auto& tok = tokenizer();
  auto in = correction_inputs(5);
  CorrectionOptions o;
  o.max_steps = 3;
  o.decoding.num_beams = 3;
  o.max_length = 10;
  o.early_stop = false;
  o.embed_chunk = 4;
  o.gen_batch = 4;
  CountingBox box;
  auto r = run_correction(in.y, in.initial, in.ids, box.fn(), toy_dae(), *m, tok, o);
  EXPECT_EQ(r.steps, 3);
  ASSERT_EQ(r.queries_per_text.size(), 5u);
  ASSERT_EQ(r.round_mean_cos.size(), 4u);
  int64_t total = 0;
  for (int64_t b = 0; b < 5; ++b) {
    EXPECT_EQ(r.queries_per_text[b], box.per_id["test/" + std::to_string(b)]) << b;
    // Round 0: one query; each round at most s·s new candidates.
    EXPECT_GE(r.queries_per_text[b], 1);
    EXPECT_LE(r.queries_per_text[b], 1 + 3 * 9);
    total += r.queries_per_text[b];
    // The answer is the best cosine seen: at least round 0's, and it is a real cosine.
    EXPECT_LE(r.best_cos[b], 1.0 + 1e-6);
  }
  EXPECT_EQ(r.total_queries(), total);
  RecordProperty("queries", int(total));
  EXPECT_EQ(int64_t(box.keys.size()), total);
  EXPECT_LE(box.max_call, 4u);  // chunks of embed_chunk texts
  // Every query had its own noise key.
  EXPECT_EQ(std::set<std::string>(box.keys.begin(), box.keys.end()).size(), box.keys.size());
  // The best cosine per text never falls below round 0's (best over all rounds).
  for (double c : r.round_mean_cos) EXPECT_TRUE(std::isfinite(c));
  double mean_best = 0;
  for (double c : r.best_cos) mean_best += c / 5;
  EXPECT_GE(mean_best + 1e-9, r.round_mean_cos[0]);
  // Per round: max_steps + 1 rounds (round 0 first), cumulative queries never decrease and end at the totals,
  // and the last round's answers are the run's answers.
  ASSERT_EQ(r.round_best_text.size(), 4u);
  ASSERT_EQ(r.round_queries.size(), 4u);
  EXPECT_EQ(r.round_best_text[0], in.initial);
  for (int64_t b = 0; b < 5; ++b) {
    EXPECT_EQ(r.round_queries[0][b], 1);
    for (size_t t = 1; t < r.round_queries.size(); ++t) EXPECT_GE(r.round_queries[t][b], r.round_queries[t - 1][b]);
  }
  EXPECT_EQ(r.round_queries.back(), r.queries_per_text);
  EXPECT_EQ(r.round_best_text.back(), r.best_text);

  // max_steps 0: the inverter's hypothesis alone, one query a text.
  o.max_steps = 0;
  CountingBox box0;
  auto r0 = run_correction(in.y, in.initial, in.ids, box0.fn(), toy_dae(), *m, tok, o);
  EXPECT_EQ(r0.steps, 0);
  EXPECT_EQ(r0.best_text, in.initial);
  EXPECT_EQ(r0.total_queries(), 5);
  // Early stop with an unreachable gain: exactly two rounds (round 2 against round 1 is the first comparison).
  o.max_steps = 10;
  o.early_stop = true;
  o.min_gain = 10.0;
  auto r1 = run_correction(in.y, in.initial, in.ids, CountingBox().fn(), toy_dae(), *m, tok, o);
  EXPECT_EQ(r1.steps, 2);
  // Duplicate text ids would share noise: refused.
  auto dup = in.ids;
  dup[1] = dup[0];
  EXPECT_THROW(run_correction(in.y, in.initial, dup, box.fn(), toy_dae(), *m, tok, o), Error);
}

// The main table's early-stopped run is read off a full run (eval.per_round): equal to running with early stop on.
TEST(Correction, EarlyStoppedRunIsAPrefixOfTheFullRun) {
  auto m = lively_corrector();
  auto in = correction_inputs(4);
  CorrectionOptions o;
  o.max_steps = 4;
  o.decoding.num_beams = 2;
  o.max_length = 10;
  o.min_gain = 0.5;  // stops at the first comparison (round 2)
  o.early_stop = false;
  auto full = run_correction(in.y, in.initial, in.ids, CountingBox().fn(), toy_dae(), *m, tokenizer(), o);
  ASSERT_EQ(full.steps, 4);
  o.early_stop = true;
  auto stopped = run_correction(in.y, in.initial, in.ids, CountingBox().fn(), toy_dae(), *m, tokenizer(), o);
  const int64_t t = early_stop_round(full.round_mean_cos, o);
  EXPECT_EQ(t, stopped.steps);
  EXPECT_EQ(full.round_best_text[t], stopped.best_text);
  EXPECT_EQ(full.round_queries[t], stopped.queries_per_text);
}

// Eval on every rank (issue 35): texts are searched a block at a time (text_block), no batch mixing two blocks, so
// a block's answers are those of a run on that block alone: what lets any world size give the same answers.
TEST(Correction, EachBlockIsSearchedAsIfAlone) {
  auto m = lively_corrector();
  auto in = correction_inputs(6);
  CorrectionOptions o;
  o.max_steps = 2;
  o.decoding.num_beams = 2;
  o.max_length = 10;
  o.early_stop = false;  // the stopping rule is the one thing that reads every block
  o.gen_batch = 4;
  o.embed_chunk = 3;
  o.text_block = 2;
  auto all = run_correction(in.y, in.initial, in.ids, CountingBox().fn(), toy_dae(), *m, tokenizer(), o);
  for (int64_t b0 : {0, 2, 4}) {
    const std::vector<std::string> initial(in.initial.begin() + b0, in.initial.begin() + b0 + 2),
        ids(in.ids.begin() + b0, in.ids.begin() + b0 + 2);
    auto alone =
        run_correction(in.y.narrow(0, b0, 2), initial, ids, CountingBox().fn(), toy_dae(), *m, tokenizer(), o);
    for (int64_t i = 0; i < 2; ++i) {
      EXPECT_EQ(alone.best_text[i], all.best_text[b0 + i]) << b0 + i;
      EXPECT_EQ(alone.best_cos[i], all.best_cos[b0 + i]) << b0 + i;  // bit for bit
      EXPECT_EQ(alone.queries_per_text[i], all.queries_per_text[b0 + i]) << b0 + i;
    }
  }
}

// Query-averaged scoring (issue 21 item 4): the mean of k queries under k independent keys, every query counted.
TEST(Correction, QueryAveragingMeansKIndependentQueries) {
  auto emb = noisy_embedder();
  QueryFn q = [&](const std::vector<std::string>& t, const std::vector<std::string>& k) { return emb->embed(t, k); };
  std::vector<std::string> texts{sentence(1, 4), sentence(2, 5), sentence(3, 3)}, keys;
  for (int i = 0; i < 3; ++i) keys.push_back(correction_query_key("t/" + std::to_string(i), 1, 0));
  EXPECT_EQ(averaging_query_key("k", 0), "k");
  EXPECT_EQ(averaging_query_key("k", 2), "k/q2");
  EXPECT_TRUE(torch::equal(query_averaged(q, texts, keys, 1, 2), query_chunked(q, texts, keys, 2)));
  const int64_t k = 4;
  auto avg = query_averaged(q, texts, keys, k, 2);
  std::vector<at::Tensor> draws;
  for (int64_t j = 0; j < k; ++j) {
    std::vector<std::string> kj;
    for (const auto& key : keys) kj.push_back(averaging_query_key(key, j));
    draws.push_back(emb->embed(texts, kj));
  }
  EXPECT_TRUE(torch::allclose(avg, torch::stack(draws).mean(0), 1e-6, 1e-6));
  // Independent keys: the k noise draws differ, and the mean is closer to the clean vector than one draw.
  auto clean = emb->clean(texts);
  for (int64_t j = 1; j < k; ++j) EXPECT_GT((draws[j] - draws[0]).abs().max().item<float>(), 1e-3) << j;
  EXPECT_LT((avg - clean).pow(2).sum().item<double>(), (draws[0] - clean).pow(2).sum().item<double>());
  EXPECT_THROW(query_averaged(q, texts, keys, 0, 2), Error);

  // In a correction run every query counts: k per candidate text.
  auto m = tiny_corrector(9);
  auto in = correction_inputs(4);
  CorrectionOptions o;
  o.max_steps = 2;
  o.decoding.num_beams = 2;
  o.max_length = 10;
  o.early_stop = false;
  o.queries_per_candidate = 3;
  CountingBox box;
  auto r = run_correction(in.y, in.initial, in.ids, box.fn(), toy_dae(), *m, tokenizer(), o);
  EXPECT_EQ(int64_t(box.keys.size()), r.total_queries());
  EXPECT_EQ(std::set<std::string>(box.keys.begin(), box.keys.end()).size(), box.keys.size());
  for (int64_t b = 0; b < 4; ++b) {
    EXPECT_EQ(r.queries_per_text[b] % 3, 0) << b;
    EXPECT_EQ(r.round_queries[0][b], 3) << b;  // round 0: the hypothesis, queried k times
  }
  o.max_steps = 0;
  EXPECT_EQ(run_correction(in.y, in.initial, in.ids, q, toy_dae(), *m, tokenizer(), o).total_queries(), 3 * 4);
}

TEST(Correction, ChunkedEmbeddingEqualsUnchunked) {
  auto emb = noisy_embedder();
  QueryFn q = [&](const std::vector<std::string>& t, const std::vector<std::string>& k) { return emb->embed(t, k); };
  std::vector<std::string> texts, keys;
  for (int i = 0; i < 23; ++i) {
    texts.push_back(sentence(i, 4));
    keys.push_back(correction_query_key("t/" + std::to_string(i % 5), i, i % 3));
  }
  auto whole = query_chunked(q, texts, keys, 1000);
  for (int64_t c : {1, 2, 7, 23}) EXPECT_TRUE(torch::equal(query_chunked(q, texts, keys, c), whole)) << c;
  EXPECT_THROW(query_chunked(q, texts, keys, 0), Error);

  // A whole correction run: identical answers, scores and query counts with chunks of 1 and of 256 texts.
  auto m = tiny_corrector(9);
  auto in = correction_inputs(4);
  CorrectionOptions o;
  o.max_steps = 2;
  o.decoding.num_beams = 2;
  o.max_length = 10;
  o.early_stop = false;
  o.embed_chunk = 1;
  auto a = run_correction(in.y, in.initial, in.ids, q, toy_dae(), *m, tokenizer(), o);
  o.embed_chunk = 256;
  auto b = run_correction(in.y, in.initial, in.ids, q, toy_dae(), *m, tokenizer(), o);
  EXPECT_EQ(a.best_text, b.best_text);
  EXPECT_EQ(a.queries_per_text, b.queries_per_text);
  ASSERT_EQ(a.best_cos.size(), b.best_cos.size());
  for (size_t i = 0; i < a.best_cos.size(); ++i) EXPECT_NEAR(a.best_cos[i], b.best_cos[i], 1e-6);
}

// Issue 36: vec2text truncates before embedding. A text over the limit is replaced by its cut, decoded, and that cut
// is what the release is queried for; a text within the limit keeps its cached rows.
TEST(EvalTruncation, TextsOverTheLimitAreEmbeddedCut) {
  using namespace daei::corrector_test;
  const auto& tok = tokenizer();
  EvalSplit split;
  split.name = "test";
  const std::string short_text = sentence(1, 3), long_text = sentence(2, 24);
  split.texts = {short_text, long_text};
  split.clean = torch::zeros({2, 3});
  split.noisy = torch::full({2, 3}, 5.0);
  const int64_t max_length = 16;
  ASSERT_LE(static_cast<int64_t>(tok.encode(short_text, 1000).size()), max_length);
  ASSERT_GT(static_cast<int64_t>(tok.encode(long_text, 1000).size()), max_length);
  std::vector<std::string> asked, asked_keys;
  const CleanNoisyFn query = [&](const std::vector<std::string>& texts, const std::vector<std::string>& keys) {
    asked = texts;
    asked_keys = keys;
    auto clean = torch::full({static_cast<int64_t>(texts.size()), 3}, 7.0);
    return std::make_pair(clean, clean + 1);
  };
  EXPECT_EQ(cut_before_embedding(split, tok, max_length, query), 1);
  const std::string cut = tok.decode(tok.encode(long_text, max_length));
  ASSERT_EQ(asked, std::vector<std::string>{cut});
  EXPECT_EQ(asked_keys, std::vector<std::string>{"eval-cut/test/1"});
  EXPECT_LT(cut.size(), long_text.size());
  EXPECT_EQ(split.texts[0], short_text);
  EXPECT_EQ(split.texts[1], cut);
  EXPECT_TRUE(torch::equal(split.clean[0], torch::zeros({3})));
  EXPECT_TRUE(torch::equal(split.noisy[0], torch::full({3}, 5.0)));
  EXPECT_TRUE(torch::equal(split.clean[1], torch::full({3}, 7.0)));
  EXPECT_TRUE(torch::equal(split.noisy[1], torch::full({3}, 8.0)));
}

// The dae chain at daei's inverter steps (issue 46): its corrector corrects stage2-continued behind the stage-1 DAE,
// with hypotheses of its own, and runs only when asked (a key that changes no saved work).
TEST(Corrector, TheContinuedDaeChainCorrectsTheControlInverter) {
  const CorrectorChain* c = find_corrector_chain("dae-corrected-continued");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->stage, "dae-continued-corrector");
  EXPECT_EQ(c->inverter_stage, "stage2-continued");
  EXPECT_EQ(c->dae_stage, "stage1");
  EXPECT_EQ(c->hyp_split, "hyp-train-dae-continued");
  EXPECT_EQ(c->hyp_val_split(), "hyp-val-dae-continued");
  EXPECT_TRUE(c->control);
  EXPECT_FALSE(c->reference);
  for (const auto& other : corrector_chains()) {
    if (&other != c) {
      EXPECT_NE(other.hyp_split, c->hyp_split) << other.system;
    }
  }
  EXPECT_FALSE(Config::defaults().flag("stage4.continued_corrector"));
  EXPECT_TRUE(cli::work_depending_on("stage4.continued_corrector").empty());
  const auto fed = cli::work_depending_on("stage4.steps");
  EXPECT_NE(std::find(fed.begin(), fed.end(), "dae-continued-corrector"), fed.end());
}
