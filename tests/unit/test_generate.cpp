// T5 generation: cache on/off equality (greedy and beam), beam width 1 == greedy, beam scores equal the
// teacher-forced log-probabilities, a tiny model trained here to copy a sequence generates it exactly, and beams and
// scores equal those of a Python reference of Hugging Face's beam search (tests/fixtures/make_beam_search_fixture.py).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/safetensors.h"
#include "model/net/generate.h"
#include "model/net/t5.h"
#include "../support/error_of.h"
#include "../support/tiny_t5.h"

namespace {

daei::T5Config tiny_config(const std::string& ff = "relu", bool tied = true) {
  daei::T5Config c = daei::test::tiny_t5_config();
  c.vocab_size = 24;
  c.num_layers = 2;
  c.num_decoder_layers = 2;
  c.feed_forward_proj = ff;
  c.tie_word_embeddings = tied;
  return c;
}

// Sum of log p(token) over the generated tokens (up to and including eos), teacher forced without cache.
std::vector<double> teacher_forced_logprob(daei::T5ModelImpl& m, const torch::Tensor& e, const torch::Tensor& mask,
                                           const torch::Tensor& seqs, std::vector<int64_t>* lens) {
  torch::NoGradGuard ng;
  auto enc = m.encode(e, mask);
  auto logits = m.decode(seqs.slice(1, 0, seqs.size(1) - 1), enc, mask);
  auto lp = torch::log_softmax(logits.to(torch::kDouble), -1);
  std::vector<double> out;
  for (int64_t b = 0; b < seqs.size(0); ++b) {
    double s = 0;
    int64_t n = 0;
    for (int64_t t = 1; t < seqs.size(1); ++t) {
      const int64_t tok = seqs[b][t].item<int64_t>();
      s += lp[b][t - 1][tok].item<double>();
      ++n;
      if (tok == m.cfg.eos_token_id) break;
    }
    out.push_back(s);
    lens->push_back(n);
  }
  return out;
}

}  // namespace

TEST(Generate, CacheOnOffAndBeamOneEqualGreedy) {
  for (const auto& ff : {std::string("relu"), std::string("gated-gelu")}) {
    torch::manual_seed(7);
    daei::T5Model m(tiny_config(ff, ff == "relu"));
    m->eval();
    auto e = torch::randn({4, 6, 32});
    auto mask = torch::ones({4, 6}, torch::kLong);
    mask[1].slice(0, 3).fill_(0);
    mask[3].slice(0, 5).fill_(0);
    daei::GenerateOptions o;
    o.max_length = 14;
    o.use_cache = true;
    auto a = daei::t5_greedy(*m, e, mask, o);
    o.use_cache = false;
    auto b = daei::t5_greedy(*m, e, mask, o);
    EXPECT_TRUE(torch::equal(a.sequences, b.sequences)) << a.sequences << b.sequences;
    EXPECT_TRUE(torch::allclose(a.scores, b.scores, 1e-5, 1e-5));
    EXPECT_EQ(a.sequences.size(1), 14);  // random model: some row runs to max_length
    EXPECT_TRUE((a.sequences.select(1, 0) == m->cfg.decoder_start_token_id).all().item<bool>());
    // Greedy's score is the teacher-forced log-prob of its own output.
    std::vector<int64_t> lens;
    auto tf = teacher_forced_logprob(*m, e, mask, a.sequences, &lens);
    for (int64_t r = 0; r < 4; ++r) EXPECT_NEAR(a.scores[r].item<double>(), tf[r], 1e-4);

    // Beam width 1 runs the beam-search code and equals greedy (early stopping, or length_penalty 0).
    for (bool early : {true, false}) {
      daei::GenerateOptions bo;
      bo.max_length = 14;
      bo.num_beams = 1;
      bo.early_stopping = early;
      bo.length_penalty = early ? 1.0 : 0.0;
      auto c = daei::t5_beam_search(*m, e, mask, bo);
      // Beam output stops at the longest hypothesis; compare on the greedy prefix, padded.
      auto g = a.sequences.slice(1, 0, c.sequences.size(1));
      EXPECT_TRUE(torch::equal(c.sequences, g)) << "early " << early << "\n" << c.sequences << "\n" << a.sequences;
      EXPECT_TRUE((a.sequences.slice(1, c.sequences.size(1)) == 0).all().item<bool>());
    }

    // Beam search: cache on/off equality and scores equal sum log-prob / len^length_penalty, len HF 4.33's: the
    // generated tokens incl. eos for an eos-ended beam, one more (the start token) for a beam cut at max_length.
    daei::GenerateOptions bo;
    bo.max_length = 12;
    bo.num_beams = 4;
    bo.num_return_sequences = 2;
    bo.length_penalty = 0.7;
    auto c1 = daei::t5_beam_search(*m, e, mask, bo);
    bo.use_cache = false;
    auto c2 = daei::t5_beam_search(*m, e, mask, bo);
    EXPECT_TRUE(torch::equal(c1.sequences, c2.sequences));
    EXPECT_TRUE(torch::allclose(c1.scores, c2.scores, 1e-6, 1e-6));
    ASSERT_EQ(c1.sequences.size(0), 8);
    auto e2 = e.repeat_interleave(2, 0), m2 = mask.repeat_interleave(2, 0);
    lens.clear();
    tf = teacher_forced_logprob(*m, e2, m2, c1.sequences, &lens);
    for (int64_t r = 0; r < 8; ++r) {
      const bool ended = c1.sequences[r][lens[r]].item<int64_t>() == m->cfg.eos_token_id;
      const double len = static_cast<double>(lens[r] + (ended ? 0 : 1));
      EXPECT_NEAR(c1.scores[r].item<double>(), tf[r] / std::pow(len, 0.7), 1e-4) << r;
      if (r % 2 == 0) {
        EXPECT_GE(c1.scores[r].item<double>(), c1.scores[r + 1].item<double>());
      }
    }
  }
}

// With length_penalty 0 and more beams than live prefixes, beam search must find the most likely sequence among
// all of them, checked by enumeration: every eos-terminated sequence up to max_length and the truncated ones, or,
// with min_length forbidding eos, only the truncated ones (there greedy often misses the optimum).
TEST(Generate, BeamSearchFindsExhaustiveOptimum) {
  torch::manual_seed(11);
  // Untied, with a softened random lm_head: a tied random T5 mostly predicts its current input token again, a
  // distribution on which greedy is already optimal.
  auto cfg = tiny_config("gated-gelu", false);
  cfg.vocab_size = 5;  // tokens 0 (pad) .. 4; eos = 1
  daei::T5Model m(cfg);
  m->eval();
  {
    torch::NoGradGuard ng;
    m->lm_head->weight.mul_(0.25);
  }
  const int64_t V = cfg.vocab_size, eos = cfg.eos_token_id;
  for (bool allow_eos : {true, false}) {
    daei::GenerateOptions o;
    o.max_length = 4;  // 3 generated tokens
    o.num_beams = 30;  // > 5^2 live prefixes at the last step
    o.length_penalty = 0.0;
    o.min_length = allow_eos ? 0 : 4;
    std::vector<std::vector<int64_t>> seqs;
    if (allow_eos) seqs.push_back({0, eos, 0, 0});
    for (int64_t a = 0; a < V; ++a) {
      if (a == eos) continue;
      if (allow_eos) seqs.push_back({0, a, eos, 0});
      for (int64_t b = 0; b < V; ++b) {
        if (b == eos) continue;
        if (allow_eos) seqs.push_back({0, a, b, eos});
        for (int64_t c = 0; c < V; ++c)
          if (c != eos) seqs.push_back({0, a, b, c});
      }
    }
    auto all = torch::zeros({static_cast<int64_t>(seqs.size()), 4}, torch::kLong);
    for (size_t i = 0; i < seqs.size(); ++i)
      for (int t = 0; t < 4; ++t) all[i][t] = seqs[i][t];
    const int64_t n = all.size(0);
    int greedy_missed = 0;
    for (int trial = 0; trial < 20; ++trial) {
      auto e = torch::randn({1, 3, cfg.d_model});
      auto mask = torch::ones({1, 3}, torch::kLong);
      std::vector<int64_t> lens;
      auto lp = teacher_forced_logprob(*m, e.expand({n, 3, cfg.d_model}), mask.expand({n, 3}), all, &lens);
      const auto best = std::max_element(lp.begin(), lp.end()) - lp.begin();
      auto want = all[best].slice(0, 0, 1 + lens[best]);
      auto out = daei::t5_beam_search(*m, e, mask, o);
      EXPECT_TRUE(torch::equal(out.sequences[0].slice(0, 0, want.size(0)), want)) << out.sequences << want;
      EXPECT_NEAR(out.scores[0].item<double>(), lp[best], 1e-4);
      auto g = daei::t5_greedy(*m, e, mask, o);
      greedy_missed += !torch::equal(g.sequences[0].slice(0, 0, want.size(0)), want);
    }
    std::printf("[generate] exhaustive check (eos %s): greedy missed the optimum in %d of 20 trials\n",
                allow_eos ? "allowed" : "forbidden", greedy_missed);
    EXPECT_GT(greedy_missed, 0) << "the check does not tell beam search from greedy";
  }
}

TEST(Generate, TrainedTinyModelCopiesSequence) {
  torch::manual_seed(3);
  auto cfg = tiny_config("gated-gelu", false);
  cfg.vocab_size = 16;
  cfg.d_model = 64;
  cfg.d_ff = 128;
  cfg.d_kv = 16;
  daei::T5Model m(cfg);
  const int64_t S = 4;
  // Task: the encoder sees the embeddings of 4 tokens (ids 3..15); the decoder must write them back, then eos.
  // A fixed set of 12 sequences is learned, then each must be generated exactly.
  torch::optim::Adam opt(m->parameters(), torch::optim::AdamOptions(4e-3));
  auto ids = torch::randint(3, cfg.vocab_size, {12, S}, torch::kLong);
  auto labels = torch::cat({ids, torch::full({12, 1}, cfg.eos_token_id, torch::kLong)}, 1);
  auto ones = torch::ones({12, S}, torch::kLong);
  m->train();
  double loss_v = 0;
  int step = 0;
  for (; step < 1000; ++step) {
    auto out = m->forward_ids(ids, ones, labels);
    opt.zero_grad();
    out.loss.backward();
    opt.step();
    loss_v = out.loss.item<double>();
    if (loss_v < 0.005) break;
  }
  std::printf("[generate] copy task: loss %.4f after %d Adam steps\n", loss_v, step);
  m->eval();
  torch::Tensor e;
  {
    torch::NoGradGuard ng;
    e = m->embed(ids);
  }
  auto mask = ones;
  daei::GenerateOptions o;
  o.max_length = 9;
  auto g = daei::t5_generate(*m, e, mask, o);
  auto want = torch::cat({torch::zeros({12, 1}, torch::kLong), labels}, 1);
  EXPECT_TRUE(torch::equal(g.sequences, want)) << "final loss " << loss_v << "\n" << g.sequences << "\n" << want;
  o.num_beams = 3;
  auto bsr = daei::t5_generate(*m, e, mask, o);
  EXPECT_TRUE(torch::equal(bsr.sequences, want)) << bsr.sequences;
}

// Issue 34: Hugging Face's repetition processors. Hand-made scores: a score below 0 is multiplied by the penalty, any
// other divided, once per id however often it occurs; ids not in the sequence are left alone.
TEST(Generate, RepetitionPenaltyFollowsHuggingFacesRule) {
  auto scores = torch::tensor({{2.0f, -1.0f, 0.5f, -3.0f, 4.0f, 0.0f}, {-2.0f, 1.0f, -0.5f, 3.0f, -4.0f, 6.0f}});
  auto seq = torch::tensor({{0, 2, 2, 3}, {0, 4, 5, 4}}, torch::kLong);
  daei::GenerateOptions o;
  o.repetition_penalty = 2.0;
  daei::apply_repetition_controls(scores, seq, o);
  const std::vector<std::vector<float>> want{{1.0f, -1.0f, 0.25f, -6.0f, 4.0f, 0.0f},
                                             {-4.0f, 1.0f, -0.5f, 3.0f, -8.0f, 3.0f}};
  for (int r = 0; r < 2; ++r)
    for (int v = 0; v < 6; ++v) EXPECT_FLOAT_EQ(scores[r][v].item<float>(), want[r][v]) << r << "," << v;
  // Beam search sees log-probabilities (all <= 0): every seen id is multiplied.
  auto lp = torch::tensor({{-0.1f, -2.0f, -3.0f}});
  o.repetition_penalty = 1.2;
  daei::apply_repetition_controls(lp, torch::tensor({{0, 1}}, torch::kLong), o);
  EXPECT_FLOAT_EQ(lp[0][0].item<float>(), -0.12f);
  EXPECT_FLOAT_EQ(lp[0][1].item<float>(), -2.4f);
  EXPECT_FLOAT_EQ(lp[0][2].item<float>(), -3.0f);
}

TEST(Generate, NoRepeatNgramBansTheFollowersOfTheLastTokens) {
  // Row "0 5 6 5": the last 1-gram "5" was followed by 6 → 6 banned (n = 2). Row "0 7 8 9": nothing to ban. n = 3 on
  // "0 5 6 5 6": the last 2-gram "5 6" was followed by 5 → 5 banned.
  auto scores = torch::zeros({2, 10});
  daei::GenerateOptions o;
  o.no_repeat_ngram_size = 2;
  daei::apply_repetition_controls(scores, torch::tensor({{0, 5, 6, 5}, {0, 7, 8, 9}}, torch::kLong), o);
  EXPECT_TRUE(std::isinf(scores[0][6].item<float>()));
  EXPECT_EQ(torch::isinf(scores).sum().item<int64_t>(), 1);
  auto s3 = torch::zeros({1, 10});
  o.no_repeat_ngram_size = 3;
  daei::apply_repetition_controls(s3, torch::tensor({{0, 5, 6, 5, 6}}, torch::kLong), o);
  EXPECT_TRUE(std::isinf(s3[0][5].item<float>()));
  EXPECT_EQ(torch::isinf(s3).sum().item<int64_t>(), 1);
  // Too short for an n-gram: no bans (HF: cur_len + 1 < n).
  auto s4 = torch::zeros({1, 10});
  o.no_repeat_ngram_size = 4;
  daei::apply_repetition_controls(s4, torch::tensor({{0, 5}}, torch::kLong), o);
  EXPECT_EQ(torch::isinf(s4).sum().item<int64_t>(), 0);
  // n = 1 bans every token seen so far, the decoder start token included (HF bans the 1-grams of input_ids).
  auto s1 = torch::zeros({1, 10});
  o.no_repeat_ngram_size = 1;
  daei::apply_repetition_controls(s1, torch::tensor({{0, 5, 6, 5}}, torch::kLong), o);
  for (int64_t t : {0, 5, 6}) EXPECT_TRUE(std::isinf(s1[0][t].item<float>())) << t;
  EXPECT_EQ(torch::isinf(s1).sum().item<int64_t>(), 3);
  // A prefix with several followers: "5" was followed by 6 and by 7, so both are banned after the last "5".
  auto sf = torch::zeros({1, 10});
  o.no_repeat_ngram_size = 2;
  daei::apply_repetition_controls(sf, torch::tensor({{0, 5, 6, 5, 7, 5}}, torch::kLong), o);
  EXPECT_TRUE(std::isinf(sf[0][6].item<float>()));
  EXPECT_TRUE(std::isinf(sf[0][7].item<float>()));
  EXPECT_EQ(torch::isinf(sf).sum().item<int64_t>(), 2);
}

// One repetition penalty serves generation (sequences as a tensor) and zsinvert (ragged prefixes): both fronts give
// the same scores, and ids outside the vocabulary are ignored.
TEST(Generate, RepetitionPenaltyHasOneRuleForTensorsAndRaggedPrefixes) {
  torch::manual_seed(7);
  auto scores = torch::randn({3, 9});
  auto a = scores.clone(), b = scores.clone();
  daei::GenerateOptions o;
  o.repetition_penalty = 1.7;
  daei::apply_repetition_controls(a, torch::tensor({{0, 3, 3, 8}, {0, 1, 2, 4}, {0, 0, 0, 0}}, torch::kLong), o);
  daei::apply_repetition_penalty(b, {{8, 3, 0}, {4, 2, 1, 0, 2}, {0, 42, -1}}, 1.7);
  EXPECT_TRUE(torch::equal(a, b)) << a << "\n" << b;
  EXPECT_FALSE(torch::equal(a, scores));
  EXPECT_NE(daei::test::error_of([&] { daei::apply_repetition_penalty(b, {{1}}, 1.7); }).find("1 prefixes"),
            std::string::npos);
}

namespace {
int64_t repeated_bigrams(const torch::Tensor& row) {
  std::set<std::pair<int64_t, int64_t>> seen;
  int64_t rep = 0;
  for (int64_t t = 1; t + 1 < row.size(0); ++t) {  // generated tokens only (after the start token)
    const auto g = std::make_pair(row[t].item<int64_t>(), row[t + 1].item<int64_t>());
    rep += !seen.insert(g).second;
  }
  return rep;
}
}  // namespace

TEST(Generate, GreedyAndBeamHonourNoRepeatNgramAndPenaltyPlacement) {
  // A random tiny model kept from eos (min_length = max_length) over 24 pieces repeats itself; with
  // no_repeat_ngram_size 2 no bigram occurs twice, in greedy and in beam search.
  torch::manual_seed(19);
  daei::T5Model m(tiny_config());
  m->eval();
  auto e = torch::randn({3, 5, 32});
  auto mask = torch::ones({3, 5}, torch::kLong);
  daei::GenerateOptions o;
  o.max_length = 20;
  o.min_length = 20;
  auto plain = daei::t5_greedy(*m, e, mask, o);
  int64_t before = 0;
  for (int64_t r = 0; r < 3; ++r) before += repeated_bigrams(plain.sequences[r]);
  ASSERT_GT(before, 0) << "the rigged model should repeat without the option: " << plain.sequences;
  o.no_repeat_ngram_size = 2;
  auto g = daei::t5_greedy(*m, e, mask, o);
  o.num_beams = 3;
  auto b = daei::t5_beam_search(*m, e, mask, o);
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(repeated_bigrams(g.sequences[r]), 0) << g.sequences[r];
    EXPECT_EQ(repeated_bigrams(b.sequences[r]), 0) << b.sequences[r];
  }
  // Beam width 1 equals greedy with the n-gram ban too (the ban is -inf in either space).
  o.num_beams = 1;
  auto b1 = daei::t5_beam_search(*m, e, mask, o);
  EXPECT_TRUE(torch::equal(b1.sequences, g.sequences.slice(1, 0, b1.sequences.size(1))));

  // repetition_penalty: greedy penalises the raw logits, beam search the log-probabilities. A step-by-step
  // reference written here (no cache) from the rule decides each next token both ways.
  const double pen = 3.0;
  auto reference = [&](bool on_logprobs) {
    torch::NoGradGuard ng;
    auto enc = m->encode(e, mask);
    auto seq = torch::full({3, 1}, m->cfg.decoder_start_token_id, torch::kLong);
    for (int step = 1; step < 12; ++step) {
      auto s = m->decode(seq, enc, mask).select(1, -1).to(torch::kFloat);
      if (on_logprobs) s = torch::log_softmax(s, -1);
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t id : std::set<int64_t>(seq[r].data_ptr<int64_t>(), seq[r].data_ptr<int64_t>() + seq.size(1))) {
          const float v = s[r][id].item<float>();
          s[r][id] = v < 0 ? v * pen : v / pen;
        }
      s.select(1, m->cfg.eos_token_id).fill_(-INFINITY);  // min_length
      seq = torch::cat({seq, s.argmax(-1).unsqueeze(1)}, 1);
    }
    return seq;
  };
  daei::GenerateOptions p;
  p.max_length = 12;
  p.min_length = 12;
  p.repetition_penalty = pen;
  auto greedy = daei::t5_greedy(*m, e, mask, p);
  p.num_beams = 1;
  auto beam1 = daei::t5_beam_search(*m, e, mask, p);
  EXPECT_TRUE(torch::equal(greedy.sequences, reference(false))) << greedy.sequences << reference(false);
  EXPECT_TRUE(torch::equal(beam1.sequences, reference(true))) << beam1.sequences << reference(true);
  // The two placements decide differently here, so the two equalities above tell them apart.
  EXPECT_FALSE(torch::equal(reference(false), reference(true))) << reference(false);
}

// Issue 34: a tiny seeded T5 (tests/fixtures/models/beam_search) decoded by an independent Python re-implementation of
// Hugging Face transformers 4.33's beam search (BeamSearchScorer / BeamHypotheses, processors on the log-probabilities,
// length = hypothesis with the start token and without eos); beams and scores must be identical, cache on and off.
// The cases include fewer returned sequences than beams and length penalties above 1 and below 0 (issue 48).
TEST(Generate, BeamSearchEqualsHuggingFaceReference) {
  const std::string dir = std::string(DAEI_FIXTURES) + "/models/beam_search";
  auto m = daei::T5ModelImpl::from_pretrained(dir);
  m->eval();
  auto io = daei::load_safetensors(dir + "/io.safetensors");
  const auto& e = io.at("inputs_embeds");
  const auto& mask = io.at("attention_mask");
  std::ifstream f(dir + "/expected.json");
  ASSERT_TRUE(f.good()) << dir << "/expected.json missing";
  const auto expected = nlohmann::json::parse(f);
  ASSERT_GE(expected.at("cases").size(), 10u);
  double max_diff = 0;
  int fewer_returned = 0, penalty_above_1 = 0, penalty_below_0 = 0;
  for (const auto& c : expected.at("cases")) {
    daei::GenerateOptions o;
    o.num_beams = c.at("num_beams").get<int64_t>();
    o.length_penalty = c.at("length_penalty").get<double>();
    o.repetition_penalty = c.at("repetition_penalty").get<double>();
    o.no_repeat_ngram_size = c.at("no_repeat_ngram_size").get<int64_t>();
    o.num_return_sequences = c.at("num_return_sequences").get<int64_t>();
    o.max_length = c.at("max_length").get<int64_t>();
    fewer_returned += o.num_return_sequences < o.num_beams;
    penalty_above_1 += o.length_penalty > 1;
    penalty_below_0 += o.length_penalty < 0;
    const auto& seqs = c.at("sequences");
    const auto& scores = c.at("scores");
    const int64_t rows = static_cast<int64_t>(seqs.size()), width = static_cast<int64_t>(seqs.at(0).size());
    auto want = torch::zeros({rows, width}, torch::kLong);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t t = 0; t < width; ++t) want[r][t] = seqs.at(r).at(t).get<int64_t>();
    for (bool cache : {true, false}) {
      o.use_cache = cache;
      const auto name = c.at("name").get<std::string>() + (cache ? " (cache)" : " (no cache)");
      auto out = daei::t5_beam_search(*m, e, mask, o);
      EXPECT_TRUE(torch::equal(out.sequences, want)) << name << "\n" << out.sequences << "\n" << want;
      ASSERT_EQ(out.scores.size(0), rows) << name;
      for (int64_t r = 0; r < rows; ++r) {
        const double d = std::abs(out.scores[r].item<double>() - scores.at(r).get<double>());
        max_diff = std::max(max_diff, d);
        EXPECT_LT(d, 1e-5) << name << " row " << r << ": " << out.scores[r].item<double>() << " vs "
                           << scores.at(r).get<double>();
      }
    }
  }
  EXPECT_GE(fewer_returned, 2);
  EXPECT_GE(penalty_above_1, 1);
  EXPECT_GE(penalty_below_0, 2);
  std::printf("[generate] beam search vs the Hugging Face reference: %zu cases, max |score diff| %.2e\n",
              expected.at("cases").size(), max_diff);
}
