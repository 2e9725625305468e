// Issue 12: the corrector (input layout, mask, save/load), DAEI's iterative correction (stopping rule, distinct
// beam, query accounting, chunked embedding) and the stage-4 hypothesis cache (resume, noise keys).
// Small models with seeded random weights: T5 d_model 32, 1+1 layers, a 40-piece SentencePiece vocabulary.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/safetensors.h"
#include "data/cache.h"
#include "dist/communicator.h"
#include "eval/correction.h"
#include "model/corrector.h"
#include "model/dae.h"
#include "model/embedder.h"
#include "model/inverter.h"
#include "model/tokenizer_spm.h"
#include "stages/hypotheses.h"
#include "stages/token_init.h"

using namespace daei;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kDim = 16, kRepeat = 2;

struct TempDir {
  fs::path p;
  explicit TempDir(const std::string& tag) {
    p = fs::temp_directory_path() / ("daei-" + tag + "-" + std::to_string(getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
  }
  ~TempDir() { fs::remove_all(p); }
  std::string str() const { return p.string(); }
};

const char* kWords[] = {"the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away", "from", "home",
                        "red", "blue", "green", "house", "tree", "river", "stone", "light"};

std::string sentence(int i, int n = 6) {
  std::string s;
  for (int k = 0; k < n; ++k) s += std::string(k ? " " : "") + kWords[(i * 7 + k * 3 + k * k) % 20];
  return s;
}

// One tiny SentencePiece model for the whole test binary.
const SpmTokenizer& tokenizer() {
  static TempDir dir("corrector-spm");
  static SpmTokenizer tok = [] {
    {
      std::ofstream out(dir.p / "corpus.txt");
      for (int i = 0; i < 400; ++i) out << sentence(i, 8) << "\n";
    }
    SpmTokenizer::train((dir.p / "corpus.txt").string(), 40, (dir.p / "spm").string());
    return SpmTokenizer((dir.p / "spm.model").string());
  }();
  return tok;
}

T5Config tiny_t5() {
  T5Config c;
  c.vocab_size = 40;
  c.d_model = 32;
  c.d_kv = 8;
  c.d_ff = 64;
  c.num_layers = 1;
  c.num_decoder_layers = 1;
  c.num_heads = 4;
  c.relative_attention_num_buckets = 8;
  c.relative_attention_max_distance = 16;
  c.dropout_rate = 0.0;
  return c;
}

Corrector tiny_corrector(uint64_t seed = 3) {
  torch::manual_seed(seed);
  CorrectorConfig c;
  c.dim = kDim;
  c.repeat = kRepeat;
  c.t5 = tiny_t5();
  Corrector m(c);
  // A LayerNorm that is not the identity affine map, so the test sees that it is applied.
  torch::NoGradGuard ng;
  m->layernorm->weight.uniform_(0.5, 1.5);
  m->layernorm->bias.uniform_(-0.2, 0.2);
  m->eval();
  return m;
}

// A deterministic clean embedder: hashed word counts, L2-normalised (the zero vector for no words).
class HashEmbedder final : public Embedder {
 public:
  int64_t dim() const override { return kDim; }
  std::string id() const override { return "hash-16"; }
  at::Tensor embed(const std::vector<std::string>& texts) const override {
    auto out = torch::zeros({int64_t(texts.size()), kDim});
    for (size_t i = 0; i < texts.size(); ++i) {
      std::istringstream in(texts[i]);
      std::string w;
      while (in >> w) {
        const size_t h = std::hash<std::string>{}(w);
        out[i][int64_t(h % kDim)] += (h >> 20) % 2 ? 1.0 : -1.0;
        out[i][int64_t((h >> 8) % kDim)] += 0.5;
      }
      auto n = out[i].norm();
      if (n.item<float>() > 0) out[i] /= n;
    }
    return out;
  }
};

std::shared_ptr<NoisyEmbedder> noisy_embedder(double sigma = 0.05, uint64_t seed = 11) {
  return std::make_shared<NoisyEmbedder>(std::make_shared<HashEmbedder>(), sigma, seed);
}

at::Tensor hyp_ids(const std::vector<std::string>& texts, int64_t max_len = 16) {
  return tokenizer().encode_batch(texts, max_len).input_ids;
}

}  // namespace

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
  torch::manual_seed(5);
  InverterConfig ic;
  ic.dim = kDim;
  ic.repeat = kRepeat;
  ic.t5 = tiny_t5();
  Inverter inv(ic);
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

// Token embeddings from black-box queries (inverter.token_init): Q has orthonormal columns, so the rows keep the
// geometry of the queried vectors (cosines equal), have norm sqrt(d_model), are the same in every call, and a
// piece the embedder maps to zero (special pieces decode to "") keeps its random row.
TEST(TokenInit, RowsKeepTheQueriedGeometry) {
  auto box = noisy_embedder(0.01, 5);
  auto make = [] {
    torch::manual_seed(4);
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

DenoiseFn toy_dae() {
  torch::manual_seed(17);
  DaeOptions o;
  o.dim = kDim;
  o.hidden = 32;
  o.depth = 1;
  o.dropout = 0;
  auto dae = std::make_shared<Dae>(o);
  (*dae)->eval();
  return [dae](const at::Tensor& y) { return (*dae)->forward(y, torch::full({y.size(0)}, 0.05)); };
}

struct Inputs {
  at::Tensor y;
  std::vector<std::string> initial, ids;
};
Inputs correction_inputs(int64_t B) {
  Inputs in;
  std::vector<std::string> truth;
  for (int64_t b = 0; b < B; ++b) {
    truth.push_back(sentence(int(b), 5));
    in.initial.push_back(sentence(int(b) + 3, 3));
    in.ids.push_back("test/" + std::to_string(b));
  }
  std::vector<std::string> keys;
  for (int64_t b = 0; b < B; ++b) keys.push_back("test/" + std::to_string(b));
  in.y = noisy_embedder()->embed(truth, keys);
  return in;
}

}  // namespace

TEST(Correction, QueryCountingIsExact) {
  auto m = tiny_corrector(9);
  {
    // Larger weights: outputs that depend on the inputs, so later rounds propose new texts.
    torch::NoGradGuard ng;
    for (auto& p : m->parameters()) p.mul_(4.0);
  }
  const auto& tok = tokenizer();
  auto in = correction_inputs(5);
  CorrectionOptions o;
  o.max_steps = 3;
  o.beam = 3;
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
  auto m = tiny_corrector(9);
  {
    torch::NoGradGuard ng;
    for (auto& p : m->parameters()) p.mul_(4.0);
  }
  auto in = correction_inputs(4);
  CorrectionOptions o;
  o.max_steps = 4;
  o.beam = 2;
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
  o.beam = 2;
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
  o.beam = 2;
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

// ----------------------------------------------------------------------------------------------------------------
// The hypothesis cache

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
    torch::manual_seed(21);
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
  for (const auto& t : hyp->texts(all)) EXPECT_LE(tokenizer().encode(t, 100).size(), 3u) << t;
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
