// RunLayout: the paths of a run directory (see run_layout.h).
#include "data/run_layout.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "core/fsutil.h"
#include "core/log.h"
#include "core/sha256.h"

namespace daei {

RunLayout::RunLayout(std::string run_dir) : root_(std::move(run_dir)) {}

std::string RunLayout::config() const { return root_ + "/config.yaml"; }
std::string RunLayout::config_history() const { return root_ + "/config.history"; }
std::string RunLayout::log_file() const { return root_ + "/daei.log"; }

std::string RunLayout::corpus_dir() const { return root_ + "/corpus"; }
std::string RunLayout::corpus(const std::string& split) const { return corpus_dir() + "/" + split + ".jsonl"; }
std::string RunLayout::corpus_stats() const { return corpus_dir() + "/stats.json"; }

std::string RunLayout::cache(const std::string& split) const { return root_ + "/cache/" + split; }
std::string RunLayout::cache_manifest(const std::string& split) const { return cache(split) + "/manifest.json"; }
std::string RunLayout::clean_cache(const std::string& split) const { return cache(split) + "/clean"; }
std::string RunLayout::clean_cache_manifest(const std::string& split) const {
  return clean_cache(split) + "/manifest.json";
}
bool RunLayout::cache_complete(const std::string& split) const { return file_exists(cache_manifest(split)); }
bool RunLayout::clean_cache_complete(const std::string& split) const {
  return file_exists(clean_cache_manifest(split));
}
std::string RunLayout::sigma_estimate() const { return root_ + "/cache/sigma_estimate.json"; }

std::string RunLayout::tokenizer_dir() const { return root_ + "/tokenizer"; }
std::string RunLayout::tokenizer_model() const { return tokenizer_dir() + "/spm.model"; }

std::string RunLayout::stage(const std::string& name) const { return root_ + "/" + name; }
std::string RunLayout::stage_final(const std::string& name) const { return stage_final_dir(stage(name)); }
std::string RunLayout::final_module(const std::string& stage_name, const std::string& module) const {
  return stage_final(stage_name) + "/" + module;
}

bool RunLayout::stage_complete(const std::string& name) const {
  const std::string f = stage_final(name);
  if (!file_exists(f + "/DONE")) return false;
  const std::string why = verify_done_folder(f);
  if (!why.empty()) LOG_WARN("[trainer] {} does not verify ({}): the stage is not complete", f, why);
  return why.empty();
}

std::string RunLayout::eval_dir() const { return root_ + "/eval"; }
std::string RunLayout::eval_file(const std::string& name) const { return eval_dir() + "/" + name; }

std::string stage_final_dir(const std::string& stage_dir) { return stage_dir + "/final"; }

std::string verify_done_folder(const std::string& dir) {
  if (!file_exists(dir + "/DONE")) return "no DONE file (incomplete)";
  const nlohmann::json done = nlohmann::json::parse(read_file(dir + "/DONE"), nullptr, false);
  if (done.is_discarded() || !done.is_object() || !done.contains("files"))
    return "DONE has no checksums (written by an older daei): not verifiable";
  const auto& files = done.at("files");
  if (!files.is_object()) return "DONE: \"files\" is not an object";
  for (const auto& [name, sha] : files.items()) {
    // A listed name stays inside the folder and a checksum is a string: "../../dev/zero" was read to the end
    // (never), a number threw json's type_error (probes of fuzz_stage_files).
    if (name.empty() || !stays_inside(name))
      return fmt::format("DONE lists '{}', which is not a file inside the folder", name);
    if (!sha.is_string()) return fmt::format("DONE: the checksum of {} is not a string", name);
    const std::string p = dir + "/" + name;
    if (!file_exists(p)) return fmt::format("{} is missing", name);
    if (sha256_file(p) != sha.get<std::string>()) return fmt::format("{}: SHA-256 differs (damaged)", name);
  }
  return "";
}

}  // namespace daei
