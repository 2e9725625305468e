// The Trainer's checkpoint pruning after a fall-back (issue 26 item 9): keep_last counts verified checkpoints only,
// so a damaged newest checkpoint is removed and never pushes an intact one out.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "core/config.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "stages/loop/data_source.h"
#include "stages/recipes/stage1.h"
#include "stages/loop/trainer.h"

using namespace daei;
namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  auto p = fs::temp_directory_path() / fmt::format("daei-test-{}-{}", name, ::getpid());
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

Config prune_config(int64_t keep_last, int64_t stop_after) {
  auto cfg = Config::defaults();
  for (const char* s : {"dae.hidden=32", "dae.depth=2", "stage1.batch_size=12", "stage1.warmup_steps=2",
                        "stage1.eval_every=0", "stage1.steps=20", "train.log_every=2", "train.ckpt_every=2",
                        "train.progress_every_s=100.0", "train.plot=false"})
    cfg.set(s, "test");
  cfg.set(fmt::format("train.keep_last={}", keep_last), "test");
  cfg.set(fmt::format("train.stop_after={}", stop_after), "test");
  return cfg;
}

std::shared_ptr<const NoisyDataset> train_rows() {
  auto s = synthetic_split(120, 16, 0.04, 7, "train");
  return std::make_shared<InMemoryDataset>(s.noisy, std::vector<std::string>{}, 0.04);
}

std::string ckpt(const std::string& dir, int64_t step) { return fmt::format("{}/ckpt-{:08d}", dir, step); }

}  // namespace

TEST(Trainer, KeepLastCountsOnlyVerifiedCheckpointsAfterAFallBack) {
  const std::string dir = temp_dir("prune");
  LocalCommunicator comm;
  {  // checkpoints at steps 2, 4 and 6, all kept
    Stage1 s(prune_config(3, 6), comm, dir, train_rows(), nullptr, false);
    ASSERT_EQ(s.run(), kExitStopped);
  }
  for (int64_t k : {2, 4, 6}) ASSERT_TRUE(Trainer::is_complete(ckpt(dir, k))) << k;
  {  // damage the newest: a resume falls back to step 4
    std::fstream f(ckpt(dir, 6) + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(ckpt(dir, 6) + "/model.safetensors") / 2));
    f.put('\x5a');
  }
  ASSERT_EQ(Trainer::latest_checkpoint(dir), ckpt(dir, 4));
  {  // resume at 4, stop at 5 with keep_last 2: the intact 4 and the new 5 are the two kept
    Stage1 s(prune_config(2, 5), comm, dir, train_rows(), nullptr, true);
    ASSERT_EQ(s.run(), kExitStopped);
  }
  EXPECT_TRUE(Trainer::verify(ckpt(dir, 5)).empty());
  EXPECT_TRUE(Trainer::verify(ckpt(dir, 4)).empty()) << "an intact checkpoint was pruned while a damaged one counted";
  EXPECT_FALSE(fs::exists(ckpt(dir, 6))) << "the damaged checkpoint was kept";
  EXPECT_FALSE(fs::exists(ckpt(dir, 2))) << "more than keep_last verified checkpoints were kept";
  EXPECT_EQ(Trainer::latest_checkpoint(dir), ckpt(dir, 5));
  fs::remove_all(dir);
}
