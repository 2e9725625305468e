// What the stages feed the T5 models: the stage-4 hypothesis cache (content, resume, decoding length, noise keys) and
// the token embeddings from black-box queries (inverter.token_init). Fixtures:
// tests/support/corrector_fixtures.h.
#include "../support/corrector_fixtures.h"
#include "../support/test_seed.h"

using namespace daei;
using namespace daei::corrector_test;
namespace fs = std::filesystem;

namespace {

struct HypFixture {
  TempDir dir{"hyps"};
  std::shared_ptr<NoisyEmbedder> emb = noisy_embedder(0.05, 23);
  LocalCommunicator comm;
  Inverter inv{nullptr};
  Dae dae{nullptr};
  static constexpr int64_t kRows = 13;

  HypFixture() {
    {
      std::ofstream out(dir.p / "train.jsonl");
      for (int i = 0; i < kRows; ++i)
        out << nlohmann::json{{"id", 100 + i}, {"text", sentence(i, 5)}}.dump() << "\n";
    }
    CacheBuildOptions c;
    c.split = "train";
    c.corpus_file = (dir.p / "train.jsonl").string();
    c.cache_dir = (dir.p / "cache/train").string();
    c.shard_rows = 5;
    c.batch_size = 4;
    c.dtype = "float32";
    build_cache(c, *emb, comm);
    torch::manual_seed(test::seed(21));
    InverterConfig ic;
    ic.dim = kDim;
    ic.repeat = kRepeat;
    ic.t5 = tiny_t5();
    inv = Inverter(ic);
    DaeOptions o;
    o.dim = kDim;
    o.hidden = 32;
    o.depth = 1;
    o.dropout = 0;
    dae = Dae(o);
  }
  HypothesisCacheOptions opts(const std::string& name, int64_t round = 0) {
    HypothesisCacheOptions o;
    o.train_cache_dir = (dir.p / "cache/train").string();
    o.cache_dir = (dir.p / "cache" / name).string();
    o.dae_sigma = 0.05;
    o.round = round;
    o.max_length = 8;
    o.batch_size = 3;
    o.shard_rows = 5;
    o.dtype = "float32";
    return o;
  }
  HypothesisCacheResult build(const HypothesisCacheOptions& o) {
    return build_hypothesis_cache(o, *inv, dae.get(), tokenizer(), *emb, comm);
  }
};

}  // namespace

TEST(Hypotheses, CacheContentAndResume) {
  HypFixture f;
  auto o = f.opts("hyp-train");
  auto r = f.build(o);
  EXPECT_EQ(r.rows, HypFixture::kRows);
  EXPECT_EQ(r.shards, 3);
  EXPECT_EQ(r.shards_built, 3);
  const auto full = verify_cache(o.cache_dir);
  EXPECT_EQ(full.rows, HypFixture::kRows);
  {  // one cache writer (issue 25): the manifest of a `cache build` cache, plus what the hypotheses come from
    const auto train_man = nlohmann::json::parse(read_file(o.train_cache_dir + "/manifest.json"));
    auto hyp_man = nlohmann::json::parse(read_file(o.cache_dir + "/manifest.json"));
    EXPECT_EQ(hyp_man.at("hypotheses").at("decoding"), "greedy");
    EXPECT_EQ(hyp_man.at("corpus_sha256"), r.source_sha256);
    hyp_man.erase("hypotheses");
    for (const auto& [k, v] : train_man.items()) EXPECT_TRUE(hyp_man.contains(k)) << k;
    for (const auto& [k, v] : hyp_man.items()) EXPECT_TRUE(train_man.contains(k)) << k;
  }

  // Row for row aligned with cache/train: same ids, the texts are the inverter's greedy hypotheses of DAE(y).
  auto train = NoisyCache::open(o.train_cache_dir);
  auto hyp = NoisyCache::open(o.cache_dir, CacheExpect{f.emb->id(), 0.05, kDim, ""});
  std::vector<int64_t> all(HypFixture::kRows);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(hyp->ids(all), train->ids(all));
  {
    torch::NoGradGuard ng;
    auto den = f.dae->forward(train->all_noisy(), torch::full({HypFixture::kRows}, 0.05));
    GenerateOptions g;
    g.max_length = 8;
    EXPECT_EQ(hyp->texts(all), tokenizer().decode_batch(f.inv->generate(den, g)));
  }
  // The stored vectors are the black box's answers under the hypothesis keys.
  auto texts = hyp->texts(all);
  auto ids = hyp->ids(all);
  std::vector<std::string> keys;
  for (int64_t i = 0; i < HypFixture::kRows; ++i) keys.push_back(hypothesis_query_key(0, ids[i], texts[i]));
  EXPECT_TRUE(torch::allclose(hyp->all_noisy(), f.emb->embed(texts, keys)));

  // Complete: a second run does nothing.
  auto again = f.build(o);
  EXPECT_TRUE(again.already_complete);
  EXPECT_EQ(again.shards_built, 0);

  // Killed mid-way: manifest not written yet, one shard missing, a partial temporary file left behind.
  fs::remove(o.cache_dir + "/manifest.json");
  fs::remove(o.cache_dir + "/shard-00001.h5");
  { std::ofstream(o.cache_dir + "/shard-00001.h5.tmp-123") << "partial"; }
  auto resumed = f.build(o);
  EXPECT_FALSE(resumed.already_complete);
  EXPECT_EQ(resumed.shards_built, 1);
  EXPECT_FALSE(file_exists(o.cache_dir + "/shard-00001.h5.tmp-123"));
  EXPECT_EQ(verify_cache(o.cache_dir).digest, full.digest);

  // Built from scratch elsewhere: the same content.
  auto o2 = f.opts("hyp-train-copy");
  f.build(o2);
  EXPECT_EQ(verify_cache(o2.cache_dir).digest, full.digest);

  // Other models: refused, nothing overwritten.
  {
    torch::NoGradGuard ng;
    f.inv->embedding_transform->net->parameters()[0].add_(0.1);
  }
  EXPECT_THROW(f.build(o), Error);
  EXPECT_EQ(verify_cache(o.cache_dir).digest, full.digest);
}

// Issue 21 item 6: the decoding length comes from the config (inverter.max_length_eval), the held-out split's
// hypotheses cover train.heldout_rows rows, and a cache decoded at another length is refused on resume.
TEST(Hypotheses, LengthFromConfigAndNoDae) {
  Config cfg = Config::defaults();
  cfg.set("inverter.max_length_eval=5", "test");
  cfg.set("train.heldout_rows=7", "test");
  cfg.set("hypotheses.max_rows=9", "test");
  const auto tr = HypothesisCacheOptions::from_config(cfg, "/r");
  EXPECT_EQ(tr.max_length, 5);
  EXPECT_EQ(tr.max_rows, 9);
  EXPECT_EQ(tr.train_cache_dir, "/r/cache/train");
  EXPECT_EQ(tr.cache_dir, "/r/cache/hyp-train");
  const auto va = HypothesisCacheOptions::from_config(cfg, "/r", "val", "hyp-val-noisy");
  EXPECT_EQ(va.max_length, 5);
  EXPECT_EQ(va.max_rows, 7);
  EXPECT_EQ(va.train_cache_dir, "/r/cache/val");
  EXPECT_EQ(va.cache_dir, "/r/cache/hyp-val-noisy");
  EXPECT_EQ(va.split, "hyp-val-noisy");

  HypFixture f;
  auto o = f.opts("hyp-len");
  o.max_length = 3;  // at most 2 tokens after the decoder start
  f.build(o);
  auto hyp = NoisyCache::open(o.cache_dir);
  std::vector<int64_t> all(HypFixture::kRows);
  std::iota(all.begin(), all.end(), 0);
  {
    // The hypotheses are the inverter's decodes at max_length 3: at most 2 pieces after the decoder start. (Encoding
    // the decoded text again may give more pieces than were generated, "▁ab"+"c" → "▁a"+"bc"+…: a seed found that.)
    torch::NoGradGuard ng;
    auto train = NoisyCache::open(o.train_cache_dir);
    auto den = f.dae->forward(train->all_noisy(), torch::full({HypFixture::kRows}, 0.05));
    GenerateOptions g3;
    g3.max_length = 3;
    const auto seqs = f.inv->generate(den, g3);
    EXPECT_LE(seqs.size(1), 3);
    EXPECT_EQ(hyp->texts(all), tokenizer().decode_batch(seqs));
  }
  o.max_length = 8;  // resumed at another length: refused, not mixed in
  EXPECT_THROW(f.build(o), Error);

  // k queries a hypothesis: the stored vector is the mean of k keyed answers; another k is refused on resume.
  auto ok = f.opts("hyp-k");
  ok.queries_per_text = 3;
  f.build(ok);
  {
    auto h = NoisyCache::open(ok.cache_dir);
    auto texts = h->texts(all);
    auto ids = h->ids(all);
    std::vector<std::string> keys;
    for (int64_t i = 0; i < HypFixture::kRows; ++i) keys.push_back(hypothesis_query_key(0, ids[i], texts[i]));
    std::vector<at::Tensor> draws;
    for (int j = 0; j < 3; ++j) {
      std::vector<std::string> kj;
      for (const auto& k : keys) kj.push_back(j == 0 ? k : k + "/q" + std::to_string(j));
      draws.push_back(f.emb->embed(texts, kj));
    }
    EXPECT_TRUE(torch::allclose(h->all_noisy(), torch::stack(draws).mean(0), 1e-5, 1e-6));
    EXPECT_FALSE(torch::allclose(h->all_noisy(), draws[0], 1e-5, 1e-6));
  }
  ok.queries_per_text = 1;
  EXPECT_THROW(f.build(ok), Error);

  // Another decoding (issue 34): hypotheses.* is read from config, written in the manifest, and a cache decoded
  // greedily is refused on resume with repetition controls on.
  cfg.set("hypotheses.no_repeat_ngram_size=2", "test");
  cfg.set("hypotheses.num_beams=3", "test");
  cfg.set("hypotheses.repetition_penalty=1.5", "test");
  const auto dec = HypothesisCacheOptions::from_config(cfg, "/r").decoding;
  EXPECT_EQ(dec.no_repeat_ngram_size, 2);
  EXPECT_EQ(dec.num_beams, 3);
  EXPECT_EQ(describe_decoding(dec), "beam 3, no_repeat_ngram_size 2, repetition_penalty 1.5");
  auto od = f.opts("hyp-dec");
  f.build(od);
  EXPECT_NE(read_file(od.cache_dir + "/manifest.json").find("\"decoding\": \"greedy\""), std::string::npos);
  od.decoding.no_repeat_ngram_size = 2;
  EXPECT_THROW(f.build(od), Error);

  // No DAE (noisy-vec2text): the inverter decodes y itself.
  auto on = f.opts("hyp-noisy");
  on.dae_sigma = 0;
  build_hypothesis_cache(on, *f.inv, nullptr, tokenizer(), *f.emb, f.comm);
  auto train = NoisyCache::open(on.train_cache_dir);
  GenerateOptions g;
  g.max_length = 8;
  torch::NoGradGuard ng;
  EXPECT_EQ(NoisyCache::open(on.cache_dir)->texts(all), tokenizer().decode_batch(f.inv->generate(train->all_noisy(), g)));
}

TEST(Hypotheses, NoiseKeysIndependent) {
  // The key names round, row and text.
  EXPECT_EQ(hypothesis_query_key(0, 7, "the cat"), "hyp/r0/7/the cat");
  EXPECT_NE(hypothesis_query_key(0, 7, "the cat"), hypothesis_query_key(0, 8, "the cat"));
  EXPECT_NE(hypothesis_query_key(0, 7, "the cat"), hypothesis_query_key(1, 7, "the cat"));
  EXPECT_NE(hypothesis_query_key(0, 7, "the cat"), hypothesis_query_key(0, 7, "the dog"));

  HypFixture f;
  auto o0 = f.opts("hyp-r0", 0), o1 = f.opts("hyp-r1", 1);
  f.build(o0);
  f.build(o1);
  auto h0 = NoisyCache::open(o0.cache_dir), h1 = NoisyCache::open(o1.cache_dir);
  auto train = NoisyCache::open(o0.train_cache_dir);
  std::vector<int64_t> all(HypFixture::kRows);
  std::iota(all.begin(), all.end(), 0);
  auto texts = h0->texts(all);
  EXPECT_EQ(h1->texts(all), texts);  // same models: same hypotheses
  auto clean = f.emb->clean(texts);
  auto n0 = h0->all_noisy() - clean, n1 = h1->all_noisy() - clean;
  auto target_noise = train->all_noisy() - f.emb->clean(train->texts(all));
  for (int64_t i = 0; i < HypFixture::kRows; ++i) {
    // Two rounds never share noise, and a hypothesis never reuses its target's noise.
    EXPECT_GT((n0[i] - n1[i]).abs().max().item<float>(), 1e-3) << i;
    EXPECT_GT((n0[i] - target_noise[i]).abs().max().item<float>(), 1e-3) << i;
  }
  // Two rows with the same hypothesis text get different noise. A random tiny inverter often repeats itself;
  // where it did not, the black box is asked directly with the keys of two rows.
  int64_t same_pairs = 0;
  for (int64_t i = 0; i < HypFixture::kRows; ++i)
    for (int64_t j = i + 1; j < HypFixture::kRows; ++j)
      if (texts[i] == texts[j]) {
        ++same_pairs;
        EXPECT_GT((n0[i] - n0[j]).abs().max().item<float>(), 1e-3) << i << " " << j;
      }
  auto ids = h0->ids(all);
  auto two = f.emb->embed({texts[0], texts[0]},
                          {hypothesis_query_key(0, ids[0], texts[0]), hypothesis_query_key(0, ids[1], texts[0])});
  EXPECT_GT((two[0] - two[1]).abs().max().item<float>(), 1e-3);
  RecordProperty("same_hypothesis_pairs", int(same_pairs));
}

// Where no piece of the first chunk rises above the noise (here σ 50 on a release whose clean vectors are far
// smaller), the rest is not queried and no row changes; the log line says so.
TEST(TokenInit, GivesUpWhereTheFirstChunkIsAllNoise) {
  auto box = noisy_embedder(50.0, 5);
  torch::manual_seed(test::seed(4));
  T5Model a(tiny_t5());
  const at::Tensor before = a->shared->weight.clone();
  const auto r = init_token_embeddings(*a, tokenizer(), *box, 3, 99, 8);
  ASSERT_GT(r.pieces, 8);
  EXPECT_TRUE(r.gave_up);
  EXPECT_EQ(r.initialised, 0);
  EXPECT_EQ(r.queried, 8);
  EXPECT_EQ(r.queries, 3 * 8);
  EXPECT_TRUE(torch::equal(a->shared->weight, before));
  EXPECT_NE(r.describe().find("none of the first 8 pieces rose above the noise in 24 black-box queries"),
            std::string::npos)
      << r.describe();
  // A release whose pieces do rise above it: every chunk is queried.
  const auto all = init_token_embeddings(*a, tokenizer(), *noisy_embedder(0.01, 5), 3, 99, 8);
  EXPECT_FALSE(all.gave_up);
  EXPECT_EQ(all.queried, all.pieces);
}

// Token embeddings from black-box queries (inverter.token_init): Q has orthonormal columns, so the rows keep the
// geometry of the queried vectors (cosines equal), have norm sqrt(d_model), are the same in every call, and a
// piece the embedder maps to zero (special pieces decode to "") keeps its random row.
TEST(TokenInit, RowsKeepTheQueriedGeometry) {
  auto box = noisy_embedder(0.01, 5);
  auto make = [] {
    torch::manual_seed(test::seed(4));
    return T5Model(tiny_t5());
  };
  T5Model a = make(), b = make();
  const at::Tensor before = a->shared->weight.clone();
  const auto r = init_token_embeddings(*a, tokenizer(), *box, 3, 99);
  init_token_embeddings(*b, tokenizer(), *box, 3, 99);
  EXPECT_TRUE(torch::equal(a->shared->weight, b->shared->weight));  // deterministic: every inverter starts equal
  EXPECT_EQ(r.pieces, tokenizer().vocab_size());
  EXPECT_EQ(r.queries, 3 * r.pieces);
  EXPECT_GT(r.initialised, r.pieces / 2);
  EXPECT_LT(r.initialised, r.pieces);  // pad / eos / unk decode to "": no word, random rows kept
  std::vector<int64_t> done;
  for (int64_t id = 0; id < r.pieces; ++id) {
    const bool changed = !torch::equal(a->shared->weight[id], before[id]);
    if (tokenizer().decode({id}).empty()) {
      EXPECT_FALSE(changed) << id;
    }
    if (changed) done.push_back(id);
  }
  ASSERT_GE(done.size(), 3u);
  // The rows' cosines are those of the mean query vectors (same keys, so the same noise).
  for (size_t i = 0; i + 1 < 4 && i + 1 < done.size(); ++i) {
    const int64_t p = done[i], q = done[i + 1];
    std::vector<std::string> tp, tq, kp, kq;
    for (int j = 0; j < 3; ++j) {
      tp.push_back(tokenizer().decode({p}));
      tq.push_back(tokenizer().decode({q}));
      kp.push_back("vocab/" + std::to_string(p) + "/q" + std::to_string(j));
      kq.push_back("vocab/" + std::to_string(q) + "/q" + std::to_string(j));
    }
    auto vp = box->embed(tp, kp).mean(0), vq = box->embed(tq, kq).mean(0);
    const double want = torch::cosine_similarity(vp, vq, 0).item<double>();
    const double got = torch::cosine_similarity(a->shared->weight[p], a->shared->weight[q], 0).item<double>();
    EXPECT_NEAR(got, want, 1e-4) << p << " " << q;
    EXPECT_NEAR(a->shared->weight[p].norm().item<double>(), std::sqrt(32.0), 1e-3);
  }
  EXPECT_THROW(init_token_embeddings(*a, tokenizer(), *box, 0, 99), Error);
}
