// Issue 5: SHA-256, GloVe embedder, counter-based noise, σ estimation, HTTP client and server.
#include <gtest/gtest.h>
#include "model/release/httplib_config.h"

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <torch/torch.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/sha256.h"
#include "model/release/embedder.h"
#include "model/release/http_embedder.h"
#include "../support/assets.h"

using namespace daei;
using nlohmann::json;

namespace {

const std::string kMini = std::string(DAEI_FIXTURES) + "/glove/mini";

// The raw vectors of the fixture, read straight from its GloVe text (`word v1 v2 v3 v4` lines; not through the
// converter).
std::map<std::string, std::vector<double>> raw_vectors() {
  std::ifstream in(std::string(DAEI_FIXTURES) + "/glove/mini.txt");
  std::map<std::string, std::vector<double>> m;
  std::string w;
  double x[4];
  while (in >> w >> x[0] >> x[1] >> x[2] >> x[3]) m[w] = std::vector<double>(x, x + 4);
  return m;
}

std::vector<double> normalized_mean(const std::vector<std::string>& words) {
  auto raw = raw_vectors();
  std::vector<double> s(4, 0.0);
  for (auto& w : words)
    for (int k = 0; k < 4; ++k) s[k] += raw.at(w)[k] / words.size();
  double n = 0;
  for (double x : s) n += x * x;
  for (double& x : s) x /= std::sqrt(n);
  return s;
}

// A fixed embedder: text → a deterministic vector (its length, then 1s), for noise and transport tests.
class FakeEmbedder : public Embedder {
 public:
  explicit FakeEmbedder(int64_t d) : d_(d) {}
  int64_t dim() const override { return d_; }
  std::string id() const override { return "fake"; }
  at::Tensor embed(const std::vector<std::string>& texts) const override {
    at::Tensor out = torch::ones({int64_t(texts.size()), d_});
    for (size_t i = 0; i < texts.size(); ++i) out[i][0] = double(texts[i].size());
    return out;
  }

 private:
  int64_t d_;
};

}  // namespace

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 h;  // a million 'a', fed in odd-sized pieces
  std::string chunk(997, 'a');
  size_t left = 1000000;
  while (left) {
    size_t n = std::min(left, chunk.size());
    h.update(chunk.data(), n);
    left -= n;
  }
  EXPECT_EQ(h.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, HardwareAndPortablePathsAgree) {
  std::string data(5000, '\0');
  uint64_t x = 1;
  for (auto& c : data) c = char((x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 56);
  for (size_t len : {0, 1, 55, 56, 63, 64, 65, 127, 128, 1000, 4999}) {
    Sha256::allow_hardware_acceleration(false);
    std::string portable = sha256_hex(data.substr(0, len));
    Sha256::allow_hardware_acceleration(true);
    EXPECT_EQ(sha256_hex(data.substr(0, len)), portable) << len;
  }
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Glove, SentenceIsNormalisedMeanOfRawVectors) {
  GloveEmbedder g(kMini);
  EXPECT_EQ(g.dim(), 4);
  EXPECT_EQ(g.id().rfind("glove-4d@", 0), 0u);
  at::Tensor e = g.embed({"The cat sat on the mat.", "Dog"});
  auto want = normalized_mean({"the", "cat", "sat", "on", "the", "mat", "."});
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(e[0][k].item<double>(), want[k], 1e-6) << k;
  auto dog = normalized_mean({"dog"});
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(e[1][k].item<double>(), dog[k], 1e-6);
  EXPECT_NEAR(e[0].norm().item<double>(), 1.0, 1e-6);
}

TEST(Glove, Tokenizer) {
  GloveEmbedder g(kMini);
  using V = std::vector<std::string>;
  EXPECT_EQ(g.tokenize("Don't  (cat)"), (V{"do", "n't", "(", "cat", ")"}));
  EXPECT_EQ(g.tokenize("the union's \"dog\","), (V{"the", "union", "'s", "\"", "dog", "\"", ","}));
  EXPECT_EQ(g.tokenize("state-of-the-art state-of-union"),
            (V{"state-of-the-art", "state", "-", "of", "-", "union"}));
}

TEST(Glove, UnknownWordsAreSkippedAndAllUnknownGivesZero) {
  GloveEmbedder g(kMini);
  at::Tensor e = g.embed({"zzyzx cat qwerty", "zzyzx qwerty", ""});
  auto cat = normalized_mean({"cat"});
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(e[0][k].item<double>(), cat[k], 1e-6);
  EXPECT_EQ(e[1].abs().sum().item<double>(), 0.0);
  EXPECT_EQ(e[2].abs().sum().item<double>(), 0.0);
  EXPECT_EQ(g.unknown_texts(), 2);
}

TEST(Glove, ConvertedFixtureMatchesJsonRowByRow) {
  GloveEmbedder g(kMini);
  auto raw = raw_vectors();
  for (auto& [w, v] : raw) {
    int64_t r = g.row(w);
    ASSERT_GE(r, 0) << w;
    for (int k = 0; k < 4; ++k) EXPECT_FLOAT_EQ(g.vectors()[r][k].item<float>(), float(v[k])) << w;
  }
}

TEST(Glove, DamagedAssetIsRefusedNamingTheFile) {
  auto dir = std::filesystem::temp_directory_path() / ("daei-glove-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::copy(kMini, dir);
  {
    std::fstream f(dir / "vectors.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  try {
    GloveEmbedder g(dir.string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vectors.safetensors"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("SHA-256"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(Noise, MomentsDeterminismAndIndependence) {
  const int64_t n = 200000;
  std::vector<float> a(n), a2(n), b(n);
  gaussian_noise(42, "train/1", a.data(), n);
  gaussian_noise(42, "train/1", a2.data(), n);
  gaussian_noise(42, "train/2", b.data(), n);
  EXPECT_EQ(a, a2);
  double m = 0, v = 0, ab = 0;
  for (int64_t i = 0; i < n; ++i) m += a[i];
  m /= n;
  for (int64_t i = 0; i < n; ++i) {
    v += (a[i] - m) * (a[i] - m);
    ab += a[i] * b[i];
  }
  v /= n - 1;
  EXPECT_NEAR(m, 0.0, 4 / std::sqrt(double(n)));
  EXPECT_NEAR(v, 1.0, 4 * std::sqrt(2.0 / n));
  EXPECT_NEAR(ab / n, 0.0, 4 / std::sqrt(double(n)));  // correlation of two keys
  std::vector<float> c(n);
  gaussian_noise(43, "train/1", c.data(), n);  // another seed: another stream
  EXPECT_NE(a, c);
}

TEST(Noise, NoisyEmbedderAddsSigmaNoiseIndependentOfBatching) {
  auto inner = std::make_shared<FakeEmbedder>(64);
  NoisyEmbedder ne(inner, 0.05, 7);
  std::vector<std::string> texts, keys;
  for (int i = 0; i < 500; ++i) {
    texts.push_back("t" + std::to_string(i));
    keys.push_back("train/" + std::to_string(i));
  }
  at::Tensor all = ne.embed(texts, keys);
  // batch of 3 in the middle: same vectors
  at::Tensor part = ne.embed({texts[10], texts[11], texts[12]}, {keys[10], keys[11], keys[12]});
  EXPECT_TRUE(torch::equal(part, all.slice(0, 10, 13)));
  at::Tensor z = all - inner->embed(texts);
  EXPECT_NEAR(z.mean().item<double>(), 0.0, 4 * 0.05 / std::sqrt(500.0 * 64));
  EXPECT_NEAR(z.std().item<double>(), 0.05, 0.05 * 4 * std::sqrt(1.0 / (2 * 500 * 64)));
  // un-keyed queries: fresh noise each time
  at::Tensor q1 = ne.embed({"x"}), q2 = ne.embed({"x"});
  EXPECT_FALSE(torch::equal(q1, q2));
  auto [c, y] = ne.embed_with_clean(texts, keys);
  EXPECT_TRUE(torch::equal(y, all));
  EXPECT_TRUE(torch::equal(c, inner->embed(texts)));
}

TEST(Sigma, EstimateRecoversSigmaWithinThreeStandardErrors) {
  auto inner = std::make_shared<FakeEmbedder>(100);
  for (double sigma : {0.01, 0.04, 0.2}) {
    NoisyEmbedder ne(inner, sigma, 99);
    auto est = estimate_sigma([&](const std::vector<std::string>& t) { return ne.embed(t); }, calibration_texts(), 20);
    EXPECT_EQ(est.queries, 160);
    EXPECT_EQ(est.dim, 100);
    EXPECT_NEAR(est.rel_se, 1 / std::sqrt(2.0 * 8 * 100 * 19), 1e-12);
    EXPECT_NEAR(est.sigma, sigma, 3 * est.rel_se * sigma) << sigma;
  }
  EXPECT_THROW(estimate_sigma([&](const std::vector<std::string>& t) { return inner->embed(t); }, {"a"}, 1), Error);
}

// ---------------------------------------------------------------------------------------------------------------
// HTTP

namespace {

HttpEmbedderOptions client_for(int port) {
  HttpEmbedderOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(port);
  o.model = "test";
  o.batch_size = 7;
  o.concurrency = 3;
  o.timeout_s = 5;
  o.retries = 3;
  o.backoff_s = 0.01;
  return o;
}

ServerOptions server_opts() {
  ServerOptions s;
  s.port = 0;
  s.max_batch = 16;
  s.max_body_bytes = 4096;
  return s;
}

}  // namespace

TEST(Http, ClientAgainstServerReturnsTheServedVectorsInOrder) {
  auto inner = std::make_shared<FakeEmbedder>(5);
  EmbeddingServer srv([&](const std::vector<std::string>& t) { return inner->embed(t); }, server_opts());
  srv.start();
  HttpEmbedder cli(client_for(srv.port()));
  std::vector<std::string> texts;
  for (int i = 0; i < 30; ++i) texts.push_back(std::string(i + 1, 'a'));
  at::Tensor got = cli.embed(texts);
  EXPECT_TRUE(torch::equal(got, inner->embed(texts)));
  EXPECT_EQ(cli.dim(), 5);
  EXPECT_EQ(cli.requests(), 5);  // ceil(30 / 7) batches, no retries
  EXPECT_EQ(srv.served(), 30);
}

TEST(Http, RetriesOn503ThenSucceeds) {
  httplib::Server flaky;
  std::atomic<int> calls{0};
  flaky.Post("/v1/embeddings", [&](const httplib::Request& req, httplib::Response& res) {
    if (calls.fetch_add(1) < 2) {
      res.status = 503;
      return;
    }
    auto j = json::parse(req.body);
    json data = json::array();
    for (size_t i = 0; i < j["input"].size(); ++i) data.push_back({{"index", i}, {"embedding", {1.0, 2.0, 3.0}}});
    res.set_content(json{{"data", data}}.dump(), "application/json");
  });
  int port = flaky.bind_to_any_port("127.0.0.1");
  std::thread t([&] { flaky.listen_after_bind(); });
  while (!flaky.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto o = client_for(port);
  o.concurrency = 1;
  HttpEmbedder cli(o);
  at::Tensor y = cli.embed({"a", "b"});
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(y[1][2].item<float>(), 3.0f);
  // with too few retries the error says what happened
  calls = -10;
  o.retries = 1;
  HttpEmbedder cli2(o);
  try {
    cli2.embed({"a"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("HTTP 503"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2 attempts"), std::string::npos) << e.what();
  }
  flaky.stop();
  t.join();
}

TEST(Http, WrongDimensionAndTimeoutAreClearErrors) {
  auto inner = std::make_shared<FakeEmbedder>(4);
  EmbeddingServer srv([&](const std::vector<std::string>& t) {
    if (!t.empty() && t[0] == "slow") std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return inner->embed(t);
  }, server_opts());
  srv.start();
  auto o = client_for(srv.port());
  o.dim = 768;
  try {
    HttpEmbedder(o).embed({"x"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("returned a 4-d vector, expected 768"), std::string::npos) << e.what();
  }
  o.dim = 0;
  o.timeout_s = 0.3;
  o.retries = 0;
  try {
    HttpEmbedder(o).embed({"slow"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("timed out after 0.3 s"), std::string::npos) << e.what();
  }
}

TEST(Http, BearerKeyWrongKeyIs401AndNeverPrinted) {
  auto inner = std::make_shared<FakeEmbedder>(3);
  auto so = server_opts();
  so.api_key = "s3cret-key-123";
  EmbeddingServer srv([&](const std::vector<std::string>& t) { return inner->embed(t); }, so);
  srv.start();
  httplib::Client raw("127.0.0.1", srv.port());
  auto r = raw.Post("/v1/embeddings", "{\"input\":[\"a\"]}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  auto o = client_for(srv.port());
  o.api_key = "wrong-key-456";
  try {
    HttpEmbedder(o).embed({"a"});
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("HTTP 401"), std::string::npos) << m;
    EXPECT_EQ(m.find("wrong-key-456"), std::string::npos) << m;
    EXPECT_EQ(m.find("s3cret"), std::string::npos) << m;
  }
  o.api_key = "s3cret-key-123";
  EXPECT_EQ(HttpEmbedder(o).embed({"ab"})[0][0].item<float>(), 2.0f);
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
}

TEST(Http, ServerAnswersMalformedRequestsWith400AndKeepsServing) {
  auto inner = std::make_shared<FakeEmbedder>(3);
  EmbeddingServer srv([&](const std::vector<std::string>& t) { return inner->embed(t); }, server_opts());
  srv.start();
  httplib::Client c("127.0.0.1", srv.port());
  std::string many = "[";
  for (int i = 0; i < 17; ++i) many += std::string(i ? "," : "") + "\"x\"";
  many += "]";
  const std::vector<std::string> bad = {
      "", "{", "}", "null", "[]", "[1,2]", "\"text\"", "42", "true", "{}", "{\"model\":\"m\"}",
      "{\"input\":null}", "{\"input\":42}", "{\"input\":true}", "{\"input\":{}}", "{\"input\":[]}",
      "{\"input\":[1]}", "{\"input\":[\"a\",null]}", "{\"input\":[[\"a\"]]}", "{\"input\":[\"a\"],\"model\":7}",
      "{\"input\":" + many + "}", "{\"input\":[\"a\"]", "{'input':['a']}", "\xff\xfe{}", "{\"input\":[\"a\"]}}"};
  for (const auto& body : bad) {
    auto r = c.Post("/v1/embeddings", body, "application/json");
    ASSERT_TRUE(r) << body;
    EXPECT_EQ(r->status, 400) << body;
    auto j = json::parse(r->body, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error")) << r->body;
  }
  EXPECT_GE(bad.size(), 20u);
  auto big = c.Post("/v1/embeddings", "{\"input\":[\"" + std::string(10000, 'a') + "\"]}", "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  auto ok = c.Post("/v1/embeddings", "{\"input\":\"abcd\",\"model\":\"m\"}", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  auto j = json::parse(ok->body);
  EXPECT_EQ(j["data"][0]["embedding"][0].get<double>(), 4.0);
  EXPECT_EQ(j["data"][0]["index"].get<int>(), 0);
}

TEST(Http, EstimateSigmaThroughServer) {
  auto inner = std::make_shared<FakeEmbedder>(100);
  auto noisy = std::make_shared<NoisyEmbedder>(inner, 0.04, 5);
  EmbeddingServer srv([&](const std::vector<std::string>& t) { return noisy->embed(t); }, server_opts());
  srv.start();
  HttpEmbedder cli(client_for(srv.port()));
  auto est = estimate_sigma([&](const std::vector<std::string>& t) { return cli.embed(t); }, calibration_texts(), 20);
  EXPECT_NEAR(est.sigma, 0.04, 3 * est.rel_se * 0.04);
}

// A burst of connections that each hold their thread (slow or idle clients) must all be served at once, also when
// threads from earlier connections are idle: e2e_bad_serve saw a normal request wait ~2 s behind idle connections
// because a woken thread still counted as free. Each job here waits until all of them have started.
TEST(Http, ConnectionThreadsServeABurstOfHoldingJobsAllAtOnce) {
  ConnectionThreads pool(64);
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  for (int i = 0; i < 3; ++i)
    pool.enqueue([&] {
      std::lock_guard<std::mutex> g(mu);
      ++done;
      cv.notify_all();
    });
  {
    std::unique_lock<std::mutex> lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(20), [&] { return done == 3; }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the warm-up threads are idle now
  const size_t warm = pool.threads();
  constexpr int kBurst = 16;
  int started = 0;
  bool all_met = true;
  for (int i = 0; i < kBurst; ++i)
    pool.enqueue([&] {
      std::unique_lock<std::mutex> lk(mu);
      ++started;
      cv.notify_all();
      all_met &= cv.wait_for(lk, std::chrono::seconds(20), [&] { return started == kBurst; });
    });
  {
    std::unique_lock<std::mutex> lk(mu);
    EXPECT_TRUE(cv.wait_for(lk, std::chrono::seconds(20), [&] { return started == kBurst; }))
        << started << " of " << kBurst << " jobs started (" << warm << " idle threads before the burst)";
  }
  pool.shutdown();
  EXPECT_TRUE(all_met);
  EXPECT_EQ(pool.threads(), 0u);
}

TEST(Http, ConnectionThreadsNeverExceedTheirMaximumAndRunEveryJob) {
  ConnectionThreads pool(2);
  std::atomic<int> ran{0}, running{0}, most{0};
  for (int i = 0; i < 12; ++i)
    pool.enqueue([&] {
      int now = ++running;
      for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      --running;
      ++ran;
    });
  pool.shutdown();  // runs the queued jobs first
  EXPECT_EQ(ran.load(), 12);
  EXPECT_LE(most.load(), 2);
}
