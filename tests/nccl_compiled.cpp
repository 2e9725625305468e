// Proves the raw NCCL layer was compiled and linked against a real NCCL: the library reports a version and it is
// the major.minor of the nccl.h we compiled against. Needs no GPU.
#include <cstdio>

#include "dist/nccl_raw.h"

int main() {
  int lib = daei::nccl_raw::version_code(), hdr = daei::nccl_raw::header_version_code();
  std::printf("NCCL library %d, header %d, CUDA devices %d\n", lib, hdr, daei::nccl_raw::cuda_device_count());
  if (lib <= 0 || lib / 100 != hdr / 100) {
    std::printf("FAIL: NCCL version mismatch\n");
    return 1;
  }
  std::printf("1 passed, 0 failed\n");
  return 0;
}
