// The run directory's config.yaml against a later command's config: a changed key that would invalidate work
// already saved in the run (a cache, a stage's checkpoints or final weights) is refused; a key that cannot (log
// frequency, threads, evaluation settings) is accepted and named. The replaced config.yaml is kept in
// config.history/, so the run's first config is never lost.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"

namespace daei::cli {

// The run-directory entries ("corpus", "cache", "tokenizer", "stage1", "stage2", "noisy-inverter",
// "clean-inverter", "stage3", "cache/hyp-train", "stage4") whose content depends on a config key; empty for a key
// that changes no saved work. A key the table does not know depends on everything (the conservative answer).
std::vector<std::string> work_depending_on(const std::string& key);

// True when the run directory holds saved work for that entry: a stage with a checkpoint or a final, a cache or
// corpus folder with files in it.
bool has_saved_work(const std::string& run_dir, const std::string& entry);

struct ConfigChanges {
  std::vector<std::string> refused;   // "stage2.lr (stage2/ holds work)"
  std::vector<std::string> accepted;  // keys whose change invalidates nothing saved
};

// Compares the run's saved config.yaml (if any) with `now`. Only reads, so every rank calls it and all refuse alike.
ConfigChanges compare_with_saved(const std::string& run_dir, const Config& now);

// Rank 0 writes `now` as config.yaml; a different previous one moves to config.history/<UTC time>.yaml first.
struct SavedConfig {
  std::optional<std::string> previous;  // the bytes config.yaml had (none: there was no file)
  std::string history_file;             // where they were kept ("" when unchanged or new)
};
SavedConfig save_config(const std::string& run_dir, const Config& now, bool changed);
// Puts back what save_config replaced (a command refused after it started).
void restore_config(const std::string& run_dir, const SavedConfig& saved);

}  // namespace daei::cli
