// Stage 1 under mpirun -np 2 / 3: N ranks on B/N rows give the 1-rank step; a stopped and resumed N-rank run equals
// the straight N-rank run.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "core/config.h"
#include "../support/mpi_world.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "dist/communicator.h"
#include "stages/loop/data_source.h"
#include "stages/recipes/stage1.h"
#include "stages/loop/trainer.h"

using namespace daei;
namespace fs = std::filesystem;

namespace {

using test::shared_dir;
using test::world;

Config cfg(int64_t steps, int64_t stop_after = 0) {
  auto c = Config::defaults();
  for (const char* s : {"dae.hidden=32", "dae.depth=2", "stage1.batch_size=12", "stage1.warmup_steps=2",
                        "stage1.eval_every=0", "train.log_every=2", "train.ckpt_every=100",
                        "train.progress_every_s=100.0"})
    c.set(s, "test");
  c.set(fmt::format("stage1.steps={}", steps), "test");
  c.set(fmt::format("train.stop_after={}", stop_after), "test");
  return c;
}

std::shared_ptr<const NoisyDataset> data() {
  auto s = synthetic_split(120, 16, 0.04, 7, "train");
  return std::make_shared<InMemoryDataset>(s.noisy, std::vector<std::string>{}, 0.04);
}

double max_diff(const std::string& a, const std::string& b) {
  auto ta = load_safetensors(a + "/model.safetensors"), tb = load_safetensors(b + "/model.safetensors");
  EXPECT_EQ(ta.size(), tb.size());
  double m = 0;
  for (auto& [k, v] : ta) m = std::max(m, (v - tb.at(k)).abs().max().item<double>());
  return m;
}

}  // namespace

TEST(Stage1Mpi, DataParallelStepsEqualOneRank) {
  const std::string dir = shared_dir("dp");
  {
    Stage1 s(cfg(3), world(), dir + "/world", data(), nullptr, false);
    ASSERT_EQ(s.run(), kExitOk);
  }
  if (world().is_root()) [&] {  // a failed ASSERT leaves the lambda, not the test: the barrier below is reached
    LocalCommunicator one;
    Stage1 s(cfg(3), one, dir + "/one", data(), nullptr, false);
    ASSERT_EQ(s.run(), kExitOk);
    const double d = max_diff(dir + "/world/final/dae", dir + "/one/final/dae");
    EXPECT_LE(d, 1e-5) << world().size() << " ranks vs 1 rank after 3 steps: max |Δ| = " << d;
    std::printf("[stage1] %d ranks vs 1 rank after 3 steps: max |Δ| = %.3g\n", world().size(), d);
    fs::remove_all(dir);
  }();
  world().barrier();
}

TEST(Stage1Mpi, StopAndResumeEqualsStraightRun) {
  const std::string dir = shared_dir("resume");
  const int64_t N = 4;
  {
    Stage1 s(cfg(2 * N), world(), dir + "/straight", data(), nullptr, false);
    ASSERT_EQ(s.run(), kExitOk);
  }
  {
    Stage1 s(cfg(2 * N, N), world(), dir + "/resumed", data(), nullptr, false);
    ASSERT_EQ(s.run(), kExitStopped);
  }
  EXPECT_TRUE(Trainer::is_complete(fmt::format("{}/resumed/ckpt-{:08d}", dir, N)));
  {
    Stage1 s(cfg(2 * N), world(), dir + "/resumed", data(), nullptr, true);
    ASSERT_EQ(s.run(), kExitOk);
  }
  if (world().is_root()) [&] {  // a failed ASSERT leaves the lambda, not the test: the barrier below is reached
    const double d = max_diff(dir + "/straight/final/dae", dir + "/resumed/final/dae");
    EXPECT_LE(d, 1e-6) << "max |Δ| = " << d;
    std::printf("[stage1] %d ranks, 2N steps vs N + resume + N: max |Δ| = %.3g\n", world().size(), d);
    fs::remove_all(dir);
  }();
  world().barrier();
}
