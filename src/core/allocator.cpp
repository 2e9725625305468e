#include "core/allocator.h"

#include <cstdlib>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace daei {

std::string configure_allocator() {
  const char* env = std::getenv("DAEI_MALLOC");
  const std::string mode = env && *env ? env : "tuned";
  if (mode != "tuned") return mode;
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum on 64-bit (HEAP_MAX_SIZE / 2); fixed, no longer dynamic
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
  return mode;
#else
  return "default";
#endif
}

}  // namespace daei
