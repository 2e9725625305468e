// The stage folder a Trainer writes (runs/NAME/stageK), apart from its checkpoints (checkpoint_store.h):
//   - StageFolder: the folder's exclusive lock for the run (core/dir_lock.h), the removal of temporaries that dead
//     writers left, and the rule for an earlier run's checkpoints: a fresh run refuses them, or with --force moves
//     them (and metrics.jsonl) to stageK/archive-SECONDS/;
//   - MetricsLog: stageK/metrics.jsonl, one JSON object a line (training lines and "eval" lines), which curves.cpp
//     draws as curves.png.
// Rank 0 only; the Trainer broadcasts the verdict.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/dir_lock.h"

namespace daei {

class StageFolder {
 public:
  // Creates dir if needed and locks it (shared with a command of this process that locked it first; an Error
  // naming the holder when another process has it).
  StageFolder(const std::string& dir, const std::string& tag);
  // Removes temporaries of dead processes; then, for a fresh run (not resume) over an earlier run's checkpoints or
  // final: without force an Error saying so, with force they are archived.
  void prepare_run(bool resume, bool force);
  // The check alone: without force an Error; with force the entries to archive (sorted). Only reads, so a command
  // can check before it writes anything.
  static std::vector<std::string> check_earlier_run(const std::string& dir, bool resume, bool force);

 private:
  std::string dir_, tag_;
  DirLock lock_;
};

class MetricsLog {
 public:
  explicit MetricsLog(const std::string& stage_dir);
  static constexpr const char* kFileName = "metrics.jsonl";
  // Keeps only the lines of steps ≤ step (a resumed run writes the later ones again); creates the file.
  void keep_until(int64_t step) const;
  // {"step", "grad_norm", "examples_per_s", each term, "lr": {group: rate}}.
  void log_step(int64_t step, const std::map<std::string, double>& terms, double grad_norm, double examples_per_s,
                const std::vector<std::pair<std::string, double>>& lr_by_group) const;
  // {"step", "eval": {name: value}}.
  void log_eval(int64_t step, const std::map<std::string, double>& values) const;

 private:
  std::string path_;
};

}  // namespace daei
