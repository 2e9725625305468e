#include "model/release/release_noise.h"

#include <sys/random.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/sha256.h"
#include "model/release/embedder.h"

namespace daei {

NoiseMode parse_noise_mode(const std::string& s) {
  if (s == "fresh") return NoiseMode::fresh;
  if (s == "per_text") return NoiseMode::per_text;
  throw UsageError(fmt::format("server.noise_mode must be fresh or per_text, got '{}'", s));
}

const char* noise_mode_name(NoiseMode m) { return m == NoiseMode::fresh ? "fresh" : "per_text"; }

NoiseKey secret_noise_key() {
  NoiseKey k;
  size_t got = 0;
  while (got < k.bytes.size()) {
    const ssize_t r = ::getrandom(k.bytes.data() + got, k.bytes.size() - got, 0);  // blocks until the pool is ready
    if (r < 0 && errno == EINTR) continue;
    DAEI_CHECK(r > 0, "cannot draw a secret noise key from the OS (getrandom: {})", std::strerror(errno));
    got += size_t(r);
  }
  k.origin = "secret (OS random, this process only)";
  return k;
}

NoiseKey fixed_noise_key(uint64_t seed) {
  Sha256 h;
  h.update("daei/noise-seed/" + std::to_string(seed));
  NoiseKey k;
  k.bytes = h.digest();
  k.fixed = true;
  k.origin = "fixed (--noise-seed)";
  return k;
}

NoiseKey noise_key_from_file(const std::string& path) {
  const std::string data = read_file(path);
  DAEI_CHECK(data.size() >= 16, "{}: a noise key file needs at least 16 bytes of key material, it has {}", path,
             data.size());
  Sha256 h;
  h.update(data);
  NoiseKey k;
  k.bytes = h.digest();
  k.fixed = true;
  k.origin = "fixed (key file " + path + ")";
  return k;
}

void keyed_gaussian_noise(const NoiseKey& key, const std::string& message, float* out, int64_t n) {
  const auto sub = hmac_sha256(key.bytes.data(), key.bytes.size(), message.data(), message.size());
  uint64_t words[4];
  for (int64_t i = 0, block = 0; i < n; ++block) {
    Sha256 h;
    h.update(sub.data(), sub.size());
    const uint64_t b = uint64_t(block);
    h.update(&b, 8);
    const auto d = h.digest();
    std::memcpy(words, d.data(), 32);
    for (int p = 0; p < 2 && i < n; ++p, i += 2) {
      const double u1 = ((words[2 * p] >> 11) + 1) * 0x1.0p-53;  // (0, 1]
      const double u2 = (words[2 * p + 1] >> 11) * 0x1.0p-53;     // [0, 1)
      const double r = std::sqrt(-2.0 * std::log(u1)), th = 2.0 * M_PI * u2;
      out[i] = static_cast<float>(r * std::cos(th));
      if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(th));
    }
  }
}

ReleaseNoise::ReleaseNoise(std::shared_ptr<const Embedder> inner, double sigma, NoiseKey key, NoiseMode mode)
    : inner_(std::move(inner)), sigma_(sigma), key_(key), mode_(mode) {
  DAEI_CHECK(sigma_ >= 0 && std::isfinite(sigma_), "embedder.sigma must be finite and >= 0, got {}", sigma_);
}

at::Tensor ReleaseNoise::clean(const std::vector<std::string>& texts) const { return inner_->embed(texts); }

at::Tensor ReleaseNoise::add_noise(const at::Tensor& clean, const std::vector<std::string>& texts) const {
  DAEI_CHECK(clean.dim() == 2 && clean.size(0) == int64_t(texts.size()), "{} rows for {} texts", clean.size(0),
             texts.size());
  at::Tensor y = clean.to(torch::kFloat32).contiguous().clone();
  if (sigma_ == 0) return y;
  const int64_t d = y.size(1);
  std::vector<float> z(d);
  float* Y = y.data_ptr<float>();
  const uint64_t first = mode_ == NoiseMode::fresh ? counter_.fetch_add(texts.size()) : 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string msg = mode_ == NoiseMode::fresh ? "fresh/" + std::to_string(first + i) : "text/" + texts[i];
    keyed_gaussian_noise(key_, msg, z.data(), d);
    for (int64_t k = 0; k < d; ++k) Y[i * d + k] += static_cast<float>(sigma_ * z[k]);
  }
  return y;
}

at::Tensor ReleaseNoise::embed(const std::vector<std::string>& texts) const { return add_noise(clean(texts), texts); }

std::string ReleaseNoise::describe() const {
  return fmt::format("{} + N(0, {}^2 I), noise {} ({}), key {}", inner_->id(), sigma_, noise_mode_name(mode_),
                     mode_ == NoiseMode::fresh ? "new noise every query" : "one noise per text",
                     key_.origin);
}

std::unique_ptr<ReleaseNoise> make_release(const Config& cfg, std::optional<uint64_t> seed) {
  if (noise_is_remote(cfg)) return nullptr;
  const NoiseMode mode = parse_noise_mode(cfg.str("server.noise_mode"));
  const std::string key_file = cfg.str("server.noise_key_file");
  DAEI_CHECK(!(seed && !key_file.empty()), "give either --noise-seed or server.noise_key_file, not both");
  NoiseKey key = seed ? fixed_noise_key(*seed) : !key_file.empty() ? noise_key_from_file(key_file) : secret_noise_key();
  if (key.fixed)
    LOG_WARN("[release] the noise key is {}: anyone who has it can compute this release's noise and subtract it; "
             "for tests and simulations only (a service draws a secret key when neither is set)", key.origin);
  return std::make_unique<ReleaseNoise>(make_clean_embedder(cfg), cfg.real("embedder.sigma"), key, mode);
}

}  // namespace daei
