// The CUDA-aware paths of a CUDA build of libtorch (the torch wheel's) on a machine without a GPU: each reports
// "no device" in one clear error, or falls back to the CPU, instead of crashing in the CUDA runtime.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "build_info.h"
#include "core/config.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "model/net/precision.h"
#include "stages/loop/trainer.h"

namespace daei {
namespace {

Config with_device(const std::string& device) {
  Config cfg = Config::defaults();
  cfg.set("train.device=" + device, "test");
  return cfg;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(CudaPaths, BuildHasTheNcclCommunicatorWhenLibtorchHasCuda) {
#ifdef DAEI_NCCL_COMMUNICATOR
  const bool communicator_built = true;
#else
  const bool communicator_built = false;
#endif
  // launch/build.sh requires NCCL wherever a wheel's nccl.h is present, so a CUDA libtorch means a built communicator.
  EXPECT_EQ(communicator_built, DAEI_TORCH_CUDA_BUILD == 1);
}

TEST(CudaPaths, NoDeviceIsReportedCleanly) {
  if (torch::cuda::is_available()) {
    // On a GPU machine the same paths take the device.
    EXPECT_GT(torch::cuda::device_count(), 0u);
    EXPECT_TRUE(train_device(with_device("auto"), 0).is_cuda());
    return;
  }
  EXPECT_EQ(torch::cuda::device_count(), 0u);
  EXPECT_FALSE(nccl_communicator_available());
  // dist.backend auto falls back to MPI; asking for NCCL is one error line, before MPI or NCCL start.
  const std::string nccl = error_of([] { make_nccl_communicator(0); });
#ifdef DAEI_NCCL_COMMUNICATOR
  EXPECT_NE(nccl.find("needs a CUDA device and this machine has none"), std::string::npos) << nccl;
#else
  EXPECT_NE(nccl.find("the NCCL communicator needs a CUDA build of libtorch"), std::string::npos) << nccl;
#endif
  // train.device: auto and cpu give the CPU, cuda is refused in one line.
  EXPECT_EQ(train_device(with_device("auto"), 0), at::Device(at::kCPU));
  EXPECT_EQ(train_device(with_device("cpu"), 1), at::Device(at::kCPU));
  const std::string dev = error_of([] { train_device(with_device("cuda"), 0); });
  EXPECT_EQ(dev, "train.device is cuda but this libtorch has no usable CUDA device");
  // A CUDA tensor cannot be made; the error is libtorch's, not a crash.
  EXPECT_FALSE(error_of([] { (void)at::zeros({2}, at::Device(at::kCUDA, 0)); }).empty());
  // Precision auto on this machine resolves on the CPU's own bf16 support, never on CUDA's.
  std::string why;
  Config cfg = with_device("auto");
  cfg.set("train.precision=auto", "test");
  const Precision p = configure_precision(cfg, {}, &why);
  EXPECT_EQ(why.find("CUDA"), std::string::npos) << why;
  if (!cpu_bf16().native()) {
    EXPECT_EQ(p, Precision::fp32) << why;
  }
  set_matmul_precision(Precision::fp32);
}

}  // namespace
}  // namespace daei
