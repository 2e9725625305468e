// Checkpoint folders of a stage: write (temporary name + rename), seal (DONE with checksums), verify, prune, load and
// the fall-back to the newest intact one (checkpoint_store.h).
#include "stages/loop/checkpoint_store.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/sha256.h"
#include "data/run_layout.h"

namespace daei {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Files under dir (recursive, relative paths), DONE excluded.
std::vector<std::string> files_under(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) {
      const std::string rel = fs::relative(e.path(), dir).string();
      if (rel != "DONE") out.push_back(rel);
    }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

CheckpointStore::CheckpointStore(std::string stage_dir, std::string tag, int64_t keep_last)
    : stage_dir_(std::move(stage_dir)), tag_(std::move(tag)), keep_last_(keep_last) {}

std::string CheckpointStore::checkpoint_name(int64_t step) { return fmt::format("ckpt-{:08d}", step); }

bool CheckpointStore::is_checkpoint_name(const std::string& n) { return n.size() == 13 && n.rfind("ckpt-", 0) == 0; }

bool CheckpointStore::is_complete(const std::string& dir) { return file_exists(dir + "/DONE"); }

// The check RunLayout makes of a final/ folder, so a checkpoint and a finished step verify alike.
std::string CheckpointStore::verify(const std::string& dir) { return verify_done_folder(dir); }

std::string CheckpointStore::latest(const std::string& stage_dir) {
  std::vector<std::string> done;
  if (!fs::is_directory(stage_dir)) return "";
  for (const auto& e : fs::directory_iterator(stage_dir)) {
    const std::string name = e.path().filename().string();
    if (is_checkpoint_name(name) && is_complete(e.path().string())) done.push_back(e.path().string());
  }
  std::sort(done.rbegin(), done.rend());
  for (const auto& d : done) {
    const std::string why = verify(d);
    if (why.empty()) return d;
    LOG_WARN("[trainer] skipping checkpoint {}: {}; falling back to the previous one", d, why);
  }
  return "";
}

void CheckpointStore::write(const std::string& name, const ModuleList* modules,
                            const std::function<void(const std::string&)>& extra, const torch::optim::Optimizer* optim,
                            const CheckpointState& s) const {
  const std::string dir = dir_of(name);
  const std::string tmp = temp_sibling(dir);
  fs::remove_all(tmp);
  make_dirs(tmp);
  if (modules) save_safetensors(tmp + "/model.safetensors", module_state(*modules));
  if (extra) extra(tmp);
  if (optim) {
    torch::serialize::OutputArchive ar;
    optim->save(ar);
    ar.save_to(tmp + "/optim.pt");
  }
  json st{{"schema", "daei.checkpoint.v2"},
          {"stage", s.stage},
          {"step", s.step},
          {"epoch", s.step / s.steps_per_epoch},
          {"sampler", {{"epoch", s.step / s.steps_per_epoch},
                       {"step_in_epoch", s.step % s.steps_per_epoch},
                       {"seed", s.seed},
                       {"n_rows", s.n_rows}}},
          {"global_batch", s.global_batch},
          {"grad_accum", s.grad_accum},
          {"world_size", s.world_size},
          {"rng", {{"scheme", "default generator re-seeded from (seed, step, rank, micro-step); nothing to restore"},
                   {"seed", s.seed}}}};
  write_file_atomic(tmp + "/state.json", st.dump(2) + "\n");
  fs::remove_all(dir);
  fs::rename(tmp, dir);
}

void CheckpointStore::seal(const std::string& name, int64_t step) {
  const std::string dir = dir_of(name);
  json files = json::object();
  for (const auto& rel : files_under(dir)) files[rel] = sha256_file(dir + "/" + rel);
  write_file_atomic(dir + "/DONE", json{{"step", step}, {"files", files}}.dump(1) + "\n");
  prune(name);
}

void CheckpointStore::prune(const std::string& just_written) {
  // keep_last counts verified checkpoints only: a damaged one (skipped by a fall-back on resume) is removed and
  // never counted, so it cannot push an intact one out. Each is verified (SHA-256 of every file) once per process.
  verified_.insert(just_written);
  std::vector<std::string> done;
  for (const auto& e : fs::directory_iterator(stage_dir_)) {
    const std::string n = e.path().filename().string();
    if (is_checkpoint_name(n) && is_complete(e.path().string())) done.push_back(n);
  }
  std::sort(done.begin(), done.end());
  std::vector<std::string> good;
  for (const auto& n : done) {
    if (!verified_.count(n)) {
      const std::string why = verify(dir_of(n));
      if (!why.empty()) {
        LOG_WARN("[{}] removing damaged checkpoint {}/{} ({})", tag_, stage_dir_, n, why);
        fs::remove_all(dir_of(n));
        continue;
      }
      verified_.insert(n);
    }
    good.push_back(n);
  }
  for (size_t i = 0; keep_last_ > 0 && i + keep_last_ < good.size(); ++i) {
    fs::remove_all(dir_of(good[i]));
    verified_.erase(good[i]);
  }
}

CheckpointState CheckpointStore::load(const std::string& dir, const ModuleList& modules,
                                      torch::optim::Optimizer& optim, int64_t global_batch, int64_t n_rows) const {
  const std::string sp = dir + "/state.json";
  CheckpointState out = parse_checkpoint_state(read_file(sp), sp);
  DAEI_CHECK(out.global_batch == global_batch,
             "{}: checkpoint was trained with global batch {}, the config says {}; resume needs the same global batch",
             dir, out.global_batch, global_batch);
  DAEI_CHECK(out.n_rows == n_rows, "{}: checkpoint was trained on {} rows, the data now has {}", dir, out.n_rows,
             n_rows);
  load_module_state(modules, load_safetensors(dir + "/model.safetensors"), dir + "/model.safetensors");
  try {
    torch::serialize::InputArchive ar;
    ar.load_from(dir + "/optim.pt");
    optim.load(ar);
  } catch (const c10::Error& e) {
    throw Error(fmt::format("{}/optim.pt: cannot be read ({})", dir, e.what_without_backtrace()));
  }
  return out;
}

}  // namespace daei
