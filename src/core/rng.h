// Counter-based randomness that does not depend on libstdc++'s distributions or on torch's generator, so the same
// (seed, key) gives the same numbers on every machine, world size and batch size.
#pragma once
#include <cstdint>
#include <string>

namespace daei {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// FNV-1a of a string, mixed: a stable 64-bit key for text such as "train/123".
inline uint64_t hash_key(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return splitmix64(h);
}

// A small deterministic stream: state advances by splitmix64.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t next() { return splitmix64(state_++ * 0xD1B54A32D192ED03ULL + 0x632BE59BD9B4E019ULL); }
  // Uniform integer in [0, n) without modulo bias.
  uint64_t below(uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t r;
    do r = next(); while (r >= limit);
    return r % n;
  }
  double uniform() { return (next() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

}  // namespace daei
