// The stage folder's lock, clean-up and archive of an earlier run, and its metrics.jsonl (stage_folder.h).
#include "stages/loop/stage_folder.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "stages/loop/checkpoint_store.h"
#include "stages/loop/stage_files.h"

namespace daei {
namespace fs = std::filesystem;
using json = nlohmann::json;

StageFolder::StageFolder(const std::string& dir, const std::string& tag) : dir_(dir), tag_(tag), lock_(dir) {}

void StageFolder::prepare_run(bool resume, bool force) {
  for (const auto& e : fs::directory_iterator(dir_)) {
    const std::string n = e.path().filename().string();
    const auto at = n.rfind(".tmp-");
    if (at == std::string::npos) continue;
    const long pid = std::strtol(n.c_str() + at + 5, nullptr, 10);
    if (!pid_alive(pid)) {
      LOG_WARN("[{}] removing {} left by a failed write (process {} is gone)", tag_, e.path().string(), pid);
      fs::remove_all(e.path());
    }
  }
  std::vector<std::string> old = check_earlier_run(dir_, resume, force);
  if (old.empty()) return;
  const std::string archive = fmt::format(
      "{}/archive-{}", dir_,
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  make_dirs(archive);
  old.push_back(MetricsLog::kFileName);
  for (const auto& n : old)
    if (fs::exists(dir_ + "/" + n)) fs::rename(dir_ + "/" + n, archive + "/" + n);
  LOG_WARN("[{}] --force: the earlier run's checkpoints moved to {}", tag_, archive);
}

std::vector<std::string> StageFolder::check_earlier_run(const std::string& dir, bool resume, bool force) {
  std::vector<std::string> old;
  if (resume || !fs::is_directory(dir)) return old;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (CheckpointStore::is_checkpoint_name(n) || n == "final") old.push_back(n);
  }
  std::sort(old.begin(), old.end());
  DAEI_CHECK(old.empty() || force,
             "{} holds checkpoints of an earlier run ({}); run with --resume to continue it, or --force to "
             "archive them and start again",
             dir, fmt::format("{}", fmt::join(old, ", ")));
  return old;
}

MetricsLog::MetricsLog(const std::string& stage_dir) : path_(stage_dir + "/" + kFileName) {}

void MetricsLog::keep_until(int64_t step) const {
  write_file_atomic(path_, file_exists(path_) ? metrics_lines_until(read_file(path_), step) : std::string());
}

void MetricsLog::log_step(int64_t step, const std::map<std::string, double>& terms, double grad_norm,
                          double examples_per_s, const std::vector<std::pair<std::string, double>>& lr_by_group) const {
  json j{{"step", step}, {"grad_norm", grad_norm}, {"examples_per_s", examples_per_s}};
  for (const auto& [k, v] : terms) j[k] = v;
  json lr = json::object();
  for (const auto& [group, rate] : lr_by_group) lr[group] = rate;
  j["lr"] = lr;
  std::ofstream(path_, std::ios::app) << j.dump() << "\n";
}

void MetricsLog::log_eval(int64_t step, const std::map<std::string, double>& values) const {
  json j{{"step", step}, {"eval", values}};
  std::ofstream(path_, std::ios::app) << j.dump() << "\n";
}

}  // namespace daei
