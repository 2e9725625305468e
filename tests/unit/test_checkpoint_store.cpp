// The Trainer's parts on their own: CheckpointStore (write, seal, prune, verify, fall-back, load), StageFolder (the
// earlier-run rule, the archive, dead temporaries), MetricsLog (lines, truncation on resume) and the option structs
// read through core/fields.h (same keys, same values, a missing key still fails).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/fsutil.h"
#include "eval/zsinvert.h"
#include "model/release/http_embedder.h"
#include "model/release/transformer_embedder.h"
#include "stages/loop/checkpoint_store.h"
#include "stages/loop/stage_folder.h"
#include "stages/loop/trainer.h"

using namespace daei;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string temp_dir(const std::string& name) {
  auto p = fs::temp_directory_path() / fmt::format("daei-store-{}-{}", name, ::getpid());
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// A module with one parameter whose value names the step, and its AdamW.
struct Toy {
  torch::nn::Linear lin{torch::nn::LinearOptions(2, 1).bias(false)};
  ModuleList modules{{"", lin.ptr()}};
  torch::optim::AdamW optim{lin->parameters(), torch::optim::AdamWOptions(1e-3)};
  void set(float v) {
    torch::NoGradGuard g;
    lin->weight.fill_(v);
  }
};

CheckpointState state(int64_t step) {
  CheckpointState s;
  s.stage = "test";
  s.step = step;
  s.steps_per_epoch = 4;
  s.seed = 7;
  s.n_rows = 40;
  s.global_batch = 10;
  s.world_size = 2;
  return s;
}

// Writes and seals the checkpoint of `step` with the weights set to `step`.
std::string write_step(CheckpointStore& store, Toy& toy, int64_t step) {
  toy.set(static_cast<float>(step));
  const std::string name = CheckpointStore::checkpoint_name(step);
  store.write(name, &toy.modules, nullptr, &toy.optim, state(step));
  store.seal(name, step);
  return store.dir_of(name);
}

void damage(const std::string& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(fs::file_size(file) / 2));
  f.put('\x5a');
}

std::vector<std::string> checkpoints_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (CheckpointStore::is_checkpoint_name(e.path().filename().string())) out.push_back(e.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

// An option struct with a key the defaults lack.
struct Opts {
  int64_t steps = 3;
  std::string missing = "kept";
  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("steps", s.steps);
    v("no_such_key", s.missing);
  }
};

}  // namespace

TEST(CheckpointStore, WritingThreeWithKeepLastTwoPrunesTheOldest) {
  const std::string dir = temp_dir("keep");
  CheckpointStore store(dir, "test", 2);
  Toy toy;
  for (int64_t s : {1, 2, 3}) EXPECT_TRUE(CheckpointStore::verify(write_step(store, toy, s)).empty()) << s;
  EXPECT_EQ(checkpoints_in(dir), (std::vector<std::string>{"ckpt-00000002", "ckpt-00000003"}));
  EXPECT_EQ(CheckpointStore::latest(dir), dir + "/ckpt-00000003");
  for (const char* f : {"model.safetensors", "optim.pt", "state.json", "DONE"})
    EXPECT_TRUE(fs::exists(dir + "/ckpt-00000003/" + f)) << f;
  const json st = json::parse(read_file(dir + "/ckpt-00000003/state.json"));
  EXPECT_EQ(st.at("schema"), "daei.checkpoint.v2");
  EXPECT_EQ(st.at("step"), 3);
  EXPECT_EQ(st.at("sampler").at("step_in_epoch"), 3);
  EXPECT_EQ(st.at("world_size"), 2);
  const json done = json::parse(read_file(dir + "/ckpt-00000003/DONE"));
  EXPECT_EQ(done.at("step"), 3);
  EXPECT_EQ(done.at("files").size(), 3u);  // every file but DONE
  fs::remove_all(dir);
}

TEST(CheckpointStore, DamagedNewestFallsBackAndKeepLastCountsOnlyVerifiedOnes) {
  const std::string dir = temp_dir("fallback");
  Toy toy;
  {
    CheckpointStore store(dir, "test", 3);
    for (int64_t s : {1, 2}) write_step(store, toy, s);
  }
  damage(dir + "/ckpt-00000002/model.safetensors");
  EXPECT_NE(CheckpointStore::verify(dir + "/ckpt-00000002").find("model.safetensors"), std::string::npos);
  EXPECT_EQ(CheckpointStore::latest(dir), dir + "/ckpt-00000001");
  {  // a new process resumed at 1 writes 3 with keep_last 2: the intact 1 and the new 3 are kept, the damaged 2 goes
    CheckpointStore store(dir, "test", 2);
    write_step(store, toy, 3);
  }
  EXPECT_EQ(checkpoints_in(dir), (std::vector<std::string>{"ckpt-00000001", "ckpt-00000003"}));
  // Without DONE a checkpoint is neither complete nor a candidate.
  fs::remove(dir + "/ckpt-00000003/DONE");
  EXPECT_FALSE(CheckpointStore::is_complete(dir + "/ckpt-00000003"));
  EXPECT_EQ(CheckpointStore::latest(dir), dir + "/ckpt-00000001");
  fs::remove_all(dir);
}

TEST(CheckpointStore, LoadRestoresWeightsAndChecksTheRun) {
  const std::string dir = temp_dir("load");
  CheckpointStore store(dir, "test", 0);
  Toy toy;
  const std::string ck = write_step(store, toy, 5);
  toy.set(0);
  const CheckpointState st = store.load(ck, toy.modules, toy.optim, 10, 40);
  EXPECT_EQ(st.step, 5);
  EXPECT_EQ(st.world_size, 2);
  EXPECT_TRUE(torch::all(toy.lin->weight == 5).item<bool>());
  try {
    store.load(ck, toy.modules, toy.optim, 20, 40);
    FAIL() << "a different global batch was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("global batch 10, the config says 20"), std::string::npos) << e.what();
  }
  EXPECT_THROW(store.load(ck, toy.modules, toy.optim, 10, 41), Error);
  write_file_atomic(ck + "/state.json", "{\"schema\": \"other\"}");
  EXPECT_THROW(store.load(ck, toy.modules, toy.optim, 10, 40), Error);
  fs::remove_all(dir);
}

TEST(StageFolder, EarlierRunIsRefusedOrArchivedAndDeadTemporariesGo) {
  const std::string dir = temp_dir("folder");
  for (const char* d : {"ckpt-00000004", "final", "other"}) make_dirs(dir + "/" + d);
  write_file_atomic(dir + "/metrics.jsonl", "{\"step\": 4}\n");
  EXPECT_TRUE(StageFolder::check_earlier_run(dir, /*resume=*/true, false).empty());
  try {
    StageFolder::check_earlier_run(dir, false, false);
    FAIL() << "a fresh run over an earlier run was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(ckpt-00000004, final)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(StageFolder::check_earlier_run(dir, false, true), (std::vector<std::string>{"ckpt-00000004", "final"}));
  const std::string dead = dir + "/ckpt-00000005.tmp-999999999", live = fmt::format("{}/x.tmp-{}", dir, ::getpid());
  make_dirs(dead);
  make_dirs(live);
  {
    StageFolder folder(dir, "test");
    EXPECT_TRUE(fs::exists(dir + "/.lock"));
    folder.prepare_run(false, true);
  }
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(dir + "/other"));
  int archives = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("archive-", 0) == 0) {
      ++archives;
      for (const char* f : {"ckpt-00000004", "final", "metrics.jsonl"}) EXPECT_TRUE(fs::exists(e.path() / f)) << f;
    }
  EXPECT_EQ(archives, 1);
  EXPECT_TRUE(StageFolder::check_earlier_run(dir, false, false).empty());
  fs::remove_all(dir);
}

TEST(MetricsLog, LinesAndTruncationOnResume) {
  const std::string dir = temp_dir("metrics");
  MetricsLog log(dir);
  log.keep_until(0);  // creates the file
  EXPECT_TRUE(file_exists(dir + "/metrics.jsonl"));
  for (int64_t s : {1, 2, 3}) log.log_step(s, {{"loss", 0.5 * s}}, 1.25, 100.0, {{"dae", 1e-3}, {"inverter", 2e-3}});
  log.log_eval(2, {{"heldout_ce", 4.0}});
  std::ifstream in(dir + "/metrics.jsonl");
  std::vector<json> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(json::parse(l));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].dump(),
            R"({"examples_per_s":100.0,"grad_norm":1.25,"loss":0.5,"lr":{"dae":0.001,"inverter":0.002},"step":1})");
  EXPECT_EQ(lines[3].dump(), R"({"eval":{"heldout_ce":4.0},"step":2})");
  log.keep_until(2);  // a resume at step 2 keeps steps 1, 2 and the eval at 2
  std::ifstream again(dir + "/metrics.jsonl");
  std::vector<int64_t> steps;
  for (std::string l; std::getline(again, l);) steps.push_back(json::parse(l).at("step"));
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 2}));
  fs::remove_all(dir);
}

TEST(OptionFields, TrainerOptionsReadTheStageAndTrainSections) {
  auto cfg = Config::defaults();
  for (const char* s : {"stage4.steps=77", "stage4.batch_size=48", "stage4.eval_every=5", "train.keep_last=9",
                        "train.adam_beta2=0.95", "train.plot=false", "run.seed=11",
                        "dist.bucket_mb=3"})
    cfg.set(s, "test");
  const TrainerOptions o = trainer_options(cfg, "stage4", "/x/stage4");
  EXPECT_EQ(o.stage_dir, "/x/stage4");
  EXPECT_EQ(o.tag, "stage4");
  EXPECT_EQ(o.total_steps, 77);
  EXPECT_EQ(o.global_batch, 48);
  EXPECT_EQ(o.eval_every, 5);
  EXPECT_EQ(o.grad_accum, cfg.integer("stage4.grad_accum"));
  EXPECT_EQ(o.schedule, cfg.str("stage4.schedule"));
  EXPECT_EQ(o.clip_norm, cfg.real("stage4.clip_norm"));
  EXPECT_EQ(o.keep_last, 9);
  EXPECT_EQ(o.beta2, 0.95);
  EXPECT_EQ(o.log_every, cfg.integer("train.log_every"));
  EXPECT_EQ(o.progress_every_s, cfg.real("train.progress_every_s"));
  EXPECT_FALSE(o.plot);
  EXPECT_EQ(o.seed, 11u);
  EXPECT_EQ(o.bucket_bytes, int64_t(3) << 20);
}

TEST(OptionFields, EmbedderAndZsinvertOptionsReadTheirKeys) {
  auto cfg = Config::defaults();
  for (const char* s : {"embedder.model=m", "embedder.batch_size=3", "embedder.retries=1", "zsinvert.beam=2",
                        "zsinvert.refine=false", "train.progress_every_s=2.5"})
    cfg.set(s, "test");
  const auto h = HttpEmbedderOptions::from_config(cfg);
  EXPECT_EQ(h.model, "m");
  EXPECT_EQ(h.batch_size, 3);
  EXPECT_EQ(h.retries, 1);
  EXPECT_EQ(h.url, cfg.str("embedder.url"));
  EXPECT_EQ(h.timeout_s, cfg.real("embedder.timeout_s"));
  TransformerEmbedderSpec t;
  TransformerEmbedderSpec::fields(t, config_reader(cfg, "embedder"));
  EXPECT_EQ(t.dir, "m");
  EXPECT_EQ(t.max_length, cfg.integer("embedder.max_length"));
  const auto z = zsinvert_options(cfg);
  EXPECT_EQ(z.beam, 2);
  EXPECT_FALSE(z.refine);
  EXPECT_EQ(z.top_k, cfg.integer("zsinvert.top_k"));
  EXPECT_EQ(z.progress_every_s, 2.5);
}

TEST(OptionFields, AMissingKeyFailsUnlessSkipped) {
  const auto cfg = Config::defaults();
  Opts o;
  read_config_fields(o, cfg, "stage1");  // skips the missing key
  EXPECT_EQ(o.steps, cfg.integer("stage1.steps"));
  EXPECT_EQ(o.missing, "kept");
  try {  // the required reader fails as Config's getters do
    Opts::fields(o, config_reader(cfg, "stage1"));
    FAIL() << "a missing key was skipped";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'stage1.no_such_key' is read by the code but has no default"),
              std::string::npos)
        << e.what();
  }
}
