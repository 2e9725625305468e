// Shared by the libFuzzer targets: the checks that stop the run (a trap is a crash libFuzzer records with its input).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace daei::fuzz {

inline void require(bool ok) {
  if (!ok) __builtin_trap();
}

// A refusal must say what was refused: the message names `what` (the file, the command, the service).
inline void require_names(const daei::Error& e, const std::string& what) {
  require(std::string(e.what()).find(what) != std::string::npos);
}

// The input after its first byte, which the targets with several readers use to pick one.
inline std::string rest(const uint8_t* data, size_t size) {
  return size ? std::string(reinterpret_cast<const char*>(data) + 1, size - 1) : std::string();
}

}  // namespace daei::fuzz
