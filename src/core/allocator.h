// The process's malloc setting, chosen once at start-up (issue 15, "The allocator").
// glibc's default returns large freed blocks to the kernel (mmap'd chunks are unmapped on free, the heap top is
// trimmed past 128 KiB) and faults them in again on the next step: a training step that frees and re-allocates the
// same activations every iteration pays minor page faults for all of them. "tuned" (the default) raises the mmap
// threshold to its maximum (32 MiB on 64-bit glibc), makes the trim threshold 1 GiB and the top pad 64 MiB, so freed
// blocks stay in the heap and are reused. DAEI_MALLOC=default leaves glibc as it is (for comparison, bench/).
#pragma once
#include <string>

namespace daei {

// Applies the setting named by DAEI_MALLOC ("tuned" when unset, or "default"); returns the name applied.
// Call first thing in main(), before large allocations. Unknown values are treated as "default" (and returned as is).
std::string configure_allocator();

}  // namespace daei
