// SHA-256 (FIPS 180-4), small and dependency-free: asset checks, cache digests, model fingerprints.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace daei {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  void update(const std::string& s) { update(s.data(), s.size()); }
  std::array<uint8_t, 32> digest();  // finishes; the object must not be updated afterwards
  std::string hex();                 // digest() as 64 lowercase hex characters
  // The x86 SHA extensions are used when the CPU has them; tests switch them off to compare both paths.
  static bool hardware_accelerated();
  static void allow_hardware_acceleration(bool allow);

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string sha256_hex(const std::string& data);
// HMAC-SHA256 (RFC 2104): the keyed hash behind the defender's noise (model/release/release_noise.h).
std::array<uint8_t, 32> hmac_sha256(const uint8_t* key, size_t key_len, const void* msg, size_t msg_len);
// Streams the file; throws Error naming it when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace daei
