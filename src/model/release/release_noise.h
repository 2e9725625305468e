// The defender's noise: what `serve-embedder` and `daei embed` add to f(x) when they release embeddings (issue 32).
//
// The attack's own simulation of a release (NoisyEmbedder, embedder.noise_seed) draws its noise from a public seed so
// that caches are reproducible; a real service must not: whoever knows the key computes the noise and subtracts it.
// So a service draws a 256-bit key from the OS's CSPRNG at start, keeps it in memory only, and derives every noise
// vector from it with a keyed hash (HMAC-SHA256), which tells nothing of the key or of other vectors:
//   fresh     z = PRF(key, "fresh/<n>"): new noise for every query (the paper's threat model; averaging k
//             answers of one text divides the noise variance by k)
//   per_text  z = PRF(key, "text/<text>"): the same noise for the same text, so repeating a query buys nothing
// A fixed key (--noise-seed, server.noise_key_file) is for tests and simulations; the service warns when one is set.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

namespace daei {

class Config;
class Embedder;

enum class NoiseMode { fresh, per_text };
NoiseMode parse_noise_mode(const std::string& s);  // "fresh" | "per_text"; UsageError otherwise
const char* noise_mode_name(NoiseMode m);

struct NoiseKey {
  std::array<uint8_t, 32> bytes{};
  bool fixed = false;   // from a seed or a key file: reproducible, and predictable by whoever has it
  std::string origin;   // for the log: "secret (OS random)", "--noise-seed", "key file <path>" (never the key)
};
NoiseKey secret_noise_key();                        // getrandom(2); throws when the OS has no entropy to give
NoiseKey fixed_noise_key(uint64_t seed);            // SHA-256 of the seed: tests and simulations
NoiseKey noise_key_from_file(const std::string& path);  // SHA-256 of the file's bytes (at least 16 of them)

// n values of N(0, 1) for (key, message): HMAC-SHA256(key, message) is the message's subkey; SHA-256(subkey ‖ i)
// for i = 0, 1, … gives the uniforms, two 53-bit uniforms a Box–Muller pair.
void keyed_gaussian_noise(const NoiseKey& key, const std::string& message, float* out, int64_t n);

// The release a service answers with: clean f(x) from `inner` plus σ·z(key, mode). Safe from several threads.
class ReleaseNoise {
 public:
  ReleaseNoise(std::shared_ptr<const Embedder> inner, double sigma, NoiseKey key, NoiseMode mode);
  at::Tensor embed(const std::vector<std::string>& texts) const;      // noisy rows
  at::Tensor clean(const std::vector<std::string>& texts) const;      // the inner model's rows (daei embed prints them)
  at::Tensor add_noise(const at::Tensor& clean, const std::vector<std::string>& texts) const;
  double sigma() const { return sigma_; }
  NoiseMode mode() const { return mode_; }
  const NoiseKey& key() const { return key_; }
  // What the service logs: inner model, σ, mode and the key's origin; never the key.
  std::string describe() const;

 private:
  std::shared_ptr<const Embedder> inner_;
  double sigma_;
  NoiseKey key_;
  NoiseMode mode_;
  mutable std::atomic<uint64_t> counter_{0};
};

// The configured release of `serve-embedder` and `daei embed`: make_clean_embedder, embedder.sigma,
// server.noise_mode, and the key: seed when given (--noise-seed), else server.noise_key_file, else a secret one.
// A fixed key is logged as a warning. nullptr when the configured embedder is a remote noisy release (nothing is
// added to its answers).
std::unique_ptr<ReleaseNoise> make_release(const Config& cfg, std::optional<uint64_t> seed);

}  // namespace daei
