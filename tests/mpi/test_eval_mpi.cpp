// Eval on every rank (issue 35) under mpirun -np 2 / 3: a split's texts are dealt to the ranks in whole blocks
// (dist/share.h) and gathered back in order, and every answer (texts, scores, query counts, every round's texts)
// equals one process's bit for bit: the inverter rows' decoding, the correction loop (whose stopping rule reads
// every rank's texts) and zsinvert.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "../support/corrector_fixtures.h"
#include "../support/mpi_world.h"
#include "core/config.h"
#include "dist/share.h"
#include "eval/correction.h"
#include "eval/systems.h"
#include "eval/zsinvert.h"
#include "model/release/release.h"
#include "model/net/t5.h"

using namespace daei;
using namespace daei::corrector_test;

namespace {

// One SentencePiece model for every rank: rank 0 trains it, every rank loads it (the ranks must tokenise alike).
std::shared_ptr<SpmTokenizer> shared_tokenizer() {
  static std::shared_ptr<SpmTokenizer> tok = [] {
    const std::string dir = test::shared_dir("eval-spm");
    if (test::world().is_root()) {
      {
        std::ofstream out(dir + "/corpus.txt");
        for (int i = 0; i < 400; ++i) out << sentence(i, 8) << "\n";
      }
      SpmTokenizer::train(dir + "/corpus.txt", 40, dir + "/spm");
    }
    test::world().barrier();
    auto t = std::make_shared<SpmTokenizer>(dir + "/spm.model");
    test::world().barrier();
    if (test::world().is_root()) std::filesystem::remove_all(dir);
    return t;
  }();
  return tok;
}

// The black box, recording the keys this rank queried.
struct KeyedBox {
  std::shared_ptr<NoisyEmbedder> emb = noisy_embedder();
  std::vector<std::string> keys;
  QueryFn fn() {
    return [this](const std::vector<std::string>& t, const std::vector<std::string>& k) {
      keys.insert(keys.end(), k.begin(), k.end());
      return emb->embed(t, k);
    };
  }
};

std::vector<uint64_t> bits(const std::vector<double>& v) {
  std::vector<uint64_t> out(v.size());
  if (!v.empty()) std::memcpy(out.data(), v.data(), v.size() * sizeof(double));
  return out;
}

// Every rank's queries: none asked twice over the world, and together exactly one process's.
void expect_same_queries(const std::vector<std::string>& split_keys, const std::vector<std::string>& one_keys) {
  const auto all = gather_in_order(test::world(), split_keys);
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), all.size()) << "a key queried twice";
  EXPECT_EQ(std::multiset<std::string>(all.begin(), all.end()),
            std::multiset<std::string>(one_keys.begin(), one_keys.end()));
}

}  // namespace

TEST(EvalMpi, GatherInOrderKeepsEveryByte) {
  auto& c = test::world();
  // Rank r holds r items (rank 0 none): strings with NUL, invalid UTF-8 and an empty one; doubles with -0 and NaN.
  auto part = [](int r, std::vector<std::string>& s, std::vector<double>& d, std::vector<int64_t>& q) {
    for (int i = 0; i < r; ++i) {
      s.push_back(i == 1 ? std::string() : fmt::format("r{}i{}", r, i) + std::string(1, '\0') + "\xff\xfe");
      d.push_back(i == 0 ? -0.0 : i == 1 ? std::numeric_limits<double>::quiet_NaN() : r + i / 3.0);
      q.push_back((int64_t(1) << 40) * r - i);
    }
  };
  std::vector<std::string> s, want_s;
  std::vector<double> d, want_d;
  std::vector<int64_t> q, want_q;
  part(c.rank(), s, d, q);
  for (int r = 0; r < c.size(); ++r) part(r, want_s, want_d, want_q);
  EXPECT_EQ(gather_in_order(c, s), want_s);
  EXPECT_EQ(bits(gather_in_order(c, d)), bits(want_d));
  EXPECT_EQ(gather_in_order(c, q), want_q);
  // The shares of a list: contiguous, in rank order, whole blocks, every item once.
  for (int64_t n : {0, 1, 5, 11, 40}) {
    const ItemRange mine = block_share(n, 3, c);
    std::vector<int64_t> items;
    for (int64_t i = mine.begin; i < mine.end; ++i) items.push_back(i);
    EXPECT_EQ(mine.begin % 3, 0);
    const auto all = gather_in_order(c, items);
    ASSERT_EQ(static_cast<int64_t>(all.size()), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(all[i], i);
  }
}

TEST(EvalMpi, InverterDecodingSplitOverRanksEqualsOneProcess) {
  Inverter inv = tiny_inverter();
  {
    torch::NoGradGuard ng;
    for (auto& p : inv->parameters()) p.mul_(3.0);  // outputs that differ from text to text
  }
  const auto e = torch::randn({11, kDim});  // 4 batches of 3 rows: uneven over 2 and 3 ranks
  EvalContext ctx(Release(Config::defaults(), 0.04));  // decode_texts queries nothing; the context needs one all the same
  ctx.tok = shared_tokenizer();
  ctx.batch_size = 3;
  ctx.max_length_eval = 10;
  ctx.decoding.repetition_penalty = 1.2;
  ctx.decoding.no_repeat_ngram_size = 3;
  for (int64_t beams : {1, 2}) {
    ctx.decoding.num_beams = beams;
    ctx.comm = &test::world();
    const auto split = decode_texts(ctx, *inv, e, "split");
    ctx.comm = nullptr;
    const auto one = decode_texts(ctx, *inv, e, "one");
    ASSERT_EQ(one.size(), 11u);
    EXPECT_EQ(split, one) << beams << " beams";
    EXPECT_GT(std::set<std::string>(one.begin(), one.end()).size(), 1u);
  }
}

TEST(EvalMpi, CorrectionSplitOverRanksEqualsOneProcess) {
  auto& c = test::world();
  const auto tok = shared_tokenizer();
  auto m = lively_corrector();
  const auto in = correction_inputs(11);  // blocks of gen_batch / beam = 2 texts: 6 blocks, 3 + 3 or 2 + 2 + 2
  CorrectionOptions o;
  o.max_steps = 3;
  o.decoding.num_beams = 2;
  o.max_length = 10;
  o.embed_chunk = 3;
  o.gen_batch = 4;
  o.decoding.repetition_penalty = 1.2;
  o.decoding.no_repeat_ngram_size = 3;
  for (const bool early : {false, true}) {
    o.early_stop = early;
    o.min_gain = early ? 0.02 : 1e-3;  // early: a stop decided on every rank's texts
    for (const int64_t k : {int64_t(1), int64_t(2)}) {
      o.queries_per_candidate = k;
      KeyedBox split_box, one_box;
      const auto split = run_correction(in.y, in.initial, in.ids, split_box.fn(), toy_dae(), *m, *tok, o, &c);
      const auto one = run_correction(in.y, in.initial, in.ids, one_box.fn(), toy_dae(), *m, *tok, o);
      SCOPED_TRACE(fmt::format("early stop {}, {} queries a candidate, world {}", early, k, c.size()));
      EXPECT_EQ(split.steps, one.steps);
      EXPECT_EQ(split.best_text, one.best_text);
      EXPECT_EQ(bits(split.best_cos), bits(one.best_cos));
      EXPECT_EQ(split.queries_per_text, one.queries_per_text);
      EXPECT_EQ(bits(split.round_mean_cos), bits(one.round_mean_cos));
      EXPECT_EQ(split.round_best_text, one.round_best_text);
      EXPECT_EQ(split.round_queries, one.round_queries);
      EXPECT_NE(one.best_text, in.initial) << "no round changed a text: the check would prove little";
      expect_same_queries(split_box.keys, one_box.keys);
    }
  }
}

TEST(EvalMpi, ZsInvertSplitOverRanksEqualsOneProcess) {
  auto& c = test::world();
  const auto tok = shared_tokenizer();
  torch::manual_seed(test::seed(5));
  auto lm = std::make_shared<T5ModelImpl>(tiny_t5());
  lm->eval();
  const ZsGenerator gen = t5_generator(lm, tok, 10);
  const auto in = correction_inputs(7);  // groups of 2 texts: 4 groups, 2 + 2 or 1 + 1 + 2
  ZsInvertOptions o;
  o.beam = 2;
  o.top_k = 4;
  o.max_steps = 3;
  o.text_batch = 2;
  o.lm_batch = 3;
  o.embed_chunk = 5;
  o.naturalness = 0.5;
  o.progress_every_s = 1000;
  for (const bool shielded : {false, true}) {
    const DenoiseFn shield = shielded ? toy_dae() : DenoiseFn([](const at::Tensor& y) { return y; });
    KeyedBox split_box, one_box;
    const auto split = run_zsinvert(in.y, in.ids, split_box.fn(), shield, gen, o, &c);
    const auto one = run_zsinvert(in.y, in.ids, one_box.fn(), shield, gen, o);
    SCOPED_TRACE(fmt::format("shielded {}, world {}", shielded, c.size()));
    EXPECT_EQ(split.best_text, one.best_text);
    EXPECT_EQ(bits(split.best_cos), bits(one.best_cos));
    EXPECT_EQ(bits(split.stage_a_cos), bits(one.stage_a_cos));
    EXPECT_EQ(split.queries_per_text, one.queries_per_text);
    EXPECT_GT(std::set<std::string>(one.best_text.begin(), one.best_text.end()).size(), 1u);
    expect_same_queries(split_box.keys, one_box.keys);
  }
}
