// Issue 32: the defender's noise (serve-embedder, daei embed) is keyed by a secret, and per_text repeats per text.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "core/sha256.h"
#include "model/release/embedder.h"
#include "model/release/release_noise.h"

using namespace daei;

namespace {

const std::string kMini = std::string(DAEI_FIXTURES) + "/glove/mini";

std::string hex(const std::array<uint8_t, 32>& d) {
  std::string s;
  for (uint8_t b : d) s += fmt::format("{:02x}", b);
  return s;
}

std::shared_ptr<Embedder> mini_glove() { return std::make_shared<GloveEmbedder>(kMini); }

}  // namespace

TEST(Hmac, Rfc4231TestCases) {
  // RFC 4231 §4.2 (20-byte key 0x0b, "Hi There") and §4.3 ("Jefe", "what do ya want for nothing?"), and §4.7 (a
  // 131-byte key, hashed first).
  const std::vector<uint8_t> k1(20, 0x0b);
  const std::string m1 = "Hi There";
  EXPECT_EQ(hex(hmac_sha256(k1.data(), k1.size(), m1.data(), m1.size())),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  const std::string k2 = "Jefe", m2 = "what do ya want for nothing?";
  EXPECT_EQ(hex(hmac_sha256(reinterpret_cast<const uint8_t*>(k2.data()), k2.size(), m2.data(), m2.size())),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  const std::vector<uint8_t> k3(131, 0xaa);
  const std::string m3 = "Test Using Larger Than Block-Size Key - Hash Key First";
  EXPECT_EQ(hex(hmac_sha256(k3.data(), k3.size(), m3.data(), m3.size())),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(ReleaseNoise, KeyedNoiseIsStandardNormalAndDependsOnKeyAndMessage) {
  const NoiseKey k = fixed_noise_key(7);
  const int64_t n = 200001;  // odd: the last Box–Muller pair is cut
  std::vector<float> z(n), again(n), other_msg(n), other_key(n);
  keyed_gaussian_noise(k, "fresh/0", z.data(), n);
  keyed_gaussian_noise(k, "fresh/0", again.data(), n);
  keyed_gaussian_noise(k, "fresh/1", other_msg.data(), n);
  keyed_gaussian_noise(fixed_noise_key(8), "fresh/0", other_key.data(), n);
  EXPECT_EQ(z, again);
  auto t = torch::from_blob(z.data(), {n}).to(torch::kFloat64);
  // N(0, 1): mean within 5 s.e. (1/sqrt(n) = 0.0022), variance within 5 s.e. (sqrt(2/n) = 0.0032).
  EXPECT_NEAR(t.mean().item<double>(), 0.0, 0.011);
  EXPECT_NEAR(t.var().item<double>(), 1.0, 0.016);
  for (auto* w : {&other_msg, &other_key}) {
    auto u = torch::from_blob(w->data(), {n}).to(torch::kFloat64);
    EXPECT_LT(std::abs((t * u).mean().item<double>()), 0.011) << "correlated with another message or key";
  }
}

TEST(ReleaseNoise, SecretKeysDifferFixedSeedsRepeat) {
  const NoiseKey a = secret_noise_key(), b = secret_noise_key();
  EXPECT_FALSE(a.fixed);
  EXPECT_NE(a.bytes, b.bytes);
  EXPECT_EQ(a.origin.find(hex(a.bytes)), std::string::npos);
  EXPECT_EQ(fixed_noise_key(3).bytes, fixed_noise_key(3).bytes);
  EXPECT_NE(fixed_noise_key(3).bytes, fixed_noise_key(4).bytes);
  EXPECT_TRUE(fixed_noise_key(3).fixed);
}

TEST(ReleaseNoise, FreshAnswersTheFirstQueryDifferentlyPerStartUnlessTheSeedIsFixed) {
  auto glove = mini_glove();
  const std::vector<std::string> q{"the cat sat"};
  ReleaseNoise s1(glove, 0.04, secret_noise_key(), NoiseMode::fresh), s2(glove, 0.04, secret_noise_key(), NoiseMode::fresh);
  EXPECT_FALSE(torch::equal(s1.embed(q), s2.embed(q))) << "two starts, same first answer: predictable noise";
  ReleaseNoise f1(glove, 0.04, fixed_noise_key(11), NoiseMode::fresh), f2(glove, 0.04, fixed_noise_key(11), NoiseMode::fresh);
  const auto a = f1.embed(q), b = f2.embed(q);
  EXPECT_TRUE(torch::equal(a, b));
  // fresh: the same text asked again gets new noise; the noise has norm ≈ σ·sqrt(d).
  const auto c = f1.embed(q);
  EXPECT_FALSE(torch::equal(a, c));
  const auto clean = glove->embed(q);
  EXPECT_NEAR((a - clean).norm().item<double>(), 0.04 * std::sqrt(double(clean.size(1))), 0.04 * 3);
}

TEST(ReleaseNoise, PerTextRepeatsOneTextAndDrawsTwoTextsIndependently) {
  auto glove = mini_glove();
  ReleaseNoise s(glove, 1.0, secret_noise_key(), NoiseMode::per_text);
  const auto a = s.embed({"the cat sat", "the dog ran", "the cat sat"});
  const auto again = s.embed({"the cat sat"});
  EXPECT_TRUE(torch::equal(a[0], a[2]));
  EXPECT_TRUE(torch::equal(a[0], again[0]));
  // Two texts: independent noise. Over many text pairs (d = 4 each), the noise correlation is ≈ 0.
  std::vector<std::string> texts;
  for (int i = 0; i < 4000; ++i) texts.push_back("text number " + std::to_string(i));
  auto zero = std::make_shared<GloveEmbedder>(kMini);  // unknown words: clean rows are 0, the answer is the noise
  ReleaseNoise z(zero, 1.0, fixed_noise_key(5), NoiseMode::per_text);
  const auto y = z.embed(texts).to(torch::kFloat64);
  const auto first = y.slice(0, 0, 2000).flatten(), second = y.slice(0, 2000, 4000).flatten();
  EXPECT_NEAR((first * second).mean().item<double>(), 0.0, 5.0 / std::sqrt(8000.0));
  EXPECT_NEAR(y.var().item<double>(), 1.0, 0.05);
  // Another key: other noise for the same text (the key, not the text alone, decides it).
  ReleaseNoise other(zero, 1.0, fixed_noise_key(6), NoiseMode::per_text);
  EXPECT_FALSE(torch::equal(z.embed({"text number 1"}), other.embed({"text number 1"})));
}

TEST(ReleaseNoise, ConfigDrawsASecretKeyByDefaultAndRefusesTwoFixedKeys) {
  auto cfg = Config::defaults();
  cfg.set("embedder.glove_dir=" + kMini, "test");
  auto r1 = make_release(cfg, std::nullopt), r2 = make_release(cfg, std::nullopt);
  ASSERT_TRUE(r1 && r2);
  EXPECT_FALSE(r1->key().fixed);
  EXPECT_NE(r1->key().bytes, r2->key().bytes);
  EXPECT_NE(r1->key().bytes, fixed_noise_key(uint64_t(cfg.integer("embedder.noise_seed"))).bytes)
      << "the public default seed must not key a service";
  EXPECT_EQ(r1->describe().find(hex(r1->key().bytes)), std::string::npos);
  EXPECT_EQ(r1->mode(), NoiseMode::fresh);
  auto fixed = make_release(cfg, uint64_t(9));
  EXPECT_TRUE(fixed->key().fixed);
  cfg.set("server.noise_key_file=/nonexistent/key", "test");
  EXPECT_THROW(make_release(cfg, uint64_t(9)), Error);
  cfg.set("server.noise_key_file=\"\"", "test");
  cfg.set("server.noise_mode=per_text", "test");
  EXPECT_EQ(make_release(cfg, std::nullopt)->mode(), NoiseMode::per_text);
}

TEST(NoisyEmbedder, PerTextSimulationKeysTheNoiseByTheText) {
  // embedder.noise_mode per_text in the attack's simulated release: the caller's query keys no longer matter.
  NoisyEmbedder e(mini_glove(), 0.04, 1);
  e.key_noise_by_text(true);
  const auto a = e.embed({"the cat sat", "the cat sat"}, {"k/1", "k/2"});
  EXPECT_TRUE(torch::equal(a[0], a[1]));
  EXPECT_NE(e.id().find("per_text"), std::string::npos);
  NoisyEmbedder f(mini_glove(), 0.04, 1);
  const auto b = f.embed({"the cat sat", "the cat sat"}, {"k/1", "k/2"});
  EXPECT_FALSE(torch::equal(b[0], b[1]));
}
