// The contextual embedder stage under mpirun -np 2 / 3: N ranks on B/N rows (in-batch negatives gathered over the
// ranks, each rank's gradient from its own rows) give the 1-rank result on B rows.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "../support/mpi_world.h"
#include "../support/toy_run.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "data/run_layout.h"
#include "dist/communicator.h"
#include "stages/recipes/sentence_embedder.h"
#include "stages/recipes/stage2.h"
#include "stages/loop/trainer.h"
#include "../support/test_seed.h"

using namespace daei;
namespace fs = std::filesystem;

// Dropout 0: the two views of a text are then equal and do not depend on the per-rank RNG streams (the Trainer seeds
// dropout by (step, rank, micro-step), so at dropout > 0 N ranks draw other masks than 1 rank). What is compared is
// the gather and gradient path: every rank's loss over the global batch, the all-reduced gradients and the updates.
// The positives are then identical, but the negatives (and so the loss and its gradient) are not trivial.
TEST(EmbedderMpi, GlobalInBatchNegativesEqualOneRank) {
  const std::string dir = test::shared_dir("embedder");
  auto cfg = test::toy_config(4, 12);
  for (const std::string s : {"embedder_train.steps=4", "embedder_train.batch_size=12", "embedder_train.warmup_steps=1",
                              "embedder_train.lr=3e-3", "embedder_train.dim=16", "embedder_train.max_length=16",
                              "embedder_train.dropout=0.0", "embedder_train.eval_every=2", "train.heldout_rows=12"})
    cfg.set(s, "test");
  auto data = test::toy_dataset(test::toy_texts(48), 16, 0.04);
  auto val = test::toy_dataset(test::toy_texts(16, 77), 16, 0.04);
  auto tok = run_tokenizer(cfg, test::world(), dir, *data);
  auto texts_of = [](std::shared_ptr<const NoisyDataset> d) {
    LmTrainData t;
    t.rows = d->size();
    t.texts = [d](const std::vector<int64_t>& rows) { return d->texts(rows); };
    return t;
  };
  EmbedderStageData d;
  d.train = texts_of(data);
  d.val = texts_of(val);
  d.tokenizer_file = RunLayout(dir).tokenizer_model();
  {
    EmbedderStage s(cfg, test::world(), dir + "/world", d, tok, false, false);
    ASSERT_EQ(s.run(), kExitOk);
  }
  if (test::world().is_root()) [&] {  // a failed ASSERT leaves the lambda, not the test: the barrier below is reached
    LocalCommunicator one;
    EmbedderStage s(cfg, one, dir + "/one", d, tok, false, false);
    ASSERT_EQ(s.run(), kExitOk);
    double worst = 0;
    for (const std::string f : {"/final/st/model.safetensors", "/final/st/2_Dense/model.safetensors"}) {
      const double diff = test::max_diff_files(dir + "/world" + f, dir + "/one" + f);
      EXPECT_LE(diff, 1e-5) << test::world().size() << " ranks vs 1 rank, " << f << ": max |Δ| = " << diff;
      worst = std::max(worst, diff);
    }
    std::printf("[embedder] %d ranks vs 1 rank after 4 steps: max |Δ| = %.3g\n", test::world().size(), worst);
    fs::remove_all(dir);
  }();
  test::world().barrier();
}
