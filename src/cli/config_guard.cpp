// Which saved work each config key feeds, and the resume check built on it (see config_guard.h).
#include "cli/config_guard.h"

#include <yaml-cpp/yaml.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <ctime>
#include <filesystem>

#include "core/fsutil.h"
#include "core/log.h"
#include "data/run_layout.h"
#include "stages/recipes/catalogue.h"

namespace daei::cli {
namespace fs = std::filesystem;
namespace {

// The saved work of the stages comes from the stage catalogue (src/stages/recipes/catalogue.h), in its order.
template <class Pick>
std::vector<std::string> stage_folders(Pick pick) {
  std::vector<std::string> out;
  for (const auto& s : stage_catalogue())
    if (pick(s)) out.push_back(s.folder);
  return out;
}

// The stages `pick` chooses and every stage that starts from one of them, directly or not (the catalogue is in the
// pipeline's order: a stage's needs come before it).
template <class Pick>
std::vector<std::string> with_downstream(Pick pick) {
  std::vector<std::string> out;
  for (const auto& s : stage_catalogue()) {
    bool fed = pick(s);
    for (const auto& need : s.needs) fed = fed || std::find(out.begin(), out.end(), need) != out.end();
    if (fed) out.push_back(s.folder);
  }
  return out;
}

std::vector<std::string> hypothesis_caches() {
  std::vector<std::string> out;
  for (const auto& c : corrector_chains()) out.push_back("cache/" + c.hyp_split);
  return out;
}

// Stage folders with the correctors' hypothesis caches placed before the first corrector (which reads them).
std::vector<std::string> with_hypotheses(const std::vector<std::string>& folders) {
  std::vector<std::string> out;
  bool placed = false;
  for (const auto& f : folders) {
    if (!placed && find_corrector_chain(f)) {
      const auto h = hypothesis_caches();
      out.insert(out.end(), h.begin(), h.end());
      placed = true;
    }
    out.push_back(f);
  }
  return out;
}

const std::vector<std::string>& all_stages() {
  static const std::vector<std::string> v = stage_folders([](const StageSpec&) { return true; });
  return v;
}

struct Rule {
  std::string prefix;                 // a dotted key or a section ("stage2."); the first matching rule wins
  std::vector<std::string> entries;  // what it feeds; empty: nothing saved depends on it
};

std::vector<std::string> budget_of(const std::string& section) {
  return stage_folders([&](const StageSpec& s) { return s.budget == section; });
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Every saved entry: the data, then the stages with the hypotheses their correctors read.
const std::vector<std::string>& everything() {
  static const std::vector<std::string> v =
      plus({"corpus", "cache", "tokenizer"}, with_hypotheses(all_stages()));
  return v;
}

// Ordered from the specific to the general. A stage's data also depends on everything before it, but a change
// upstream is already refused by the upstream entry's own saved work, so each key names only what reads it first.
const std::vector<Rule>& rules() {
  static const std::vector<Rule> r = {
      // How a run is executed or reported, not what it computes.
      {"log.", {}},
      {"dist.", {}},
      {"assets.", {}},
      {"run.root", {}},
      {"run.name", {}},
      {"train.threads", {}},
      {"train.log_every", {}},
      {"train.progress_every_s", {}},
      {"train.ckpt_every", {}},
      {"train.keep_last", {}},
      {"train.stop_after", {}},
      {"train.device", {}},
      {"train.precision", {}},              // fp32 checkpoints either way; they load and resume under either precision
      {"train.fused_adamw", {}},            // the same AdamW results (tests/unit/test_fused_adamw.cpp), only faster
      {"train.plot", {}},
      {"stage1.eval_every", {}},
      {"stage1.eval_rows", {}},
      {"stage2.eval_every", {}},
      {"stage3.eval_every", {}},
      {"stage4.eval_every", {}},
      {"lm.eval_every", {}},
      {"bow.eval_every", {}},
      {"pretrain.eval_every", {}},
      {"embedder_train.eval_every", {}},
      {"embedder_train.report_texts", {}},   // the final report's texts and σs: measured, not trained on
      {"embedder_train.report_sigmas", {}},
      {"train.heldout_rows", {}},           // the held-out CE's rows and cache/hyp-val*: logged, not trained on
      {"hypotheses.batch_size", {}},
      {"embedder.batch_size", {}},
      {"embedder.concurrency", {}},
      {"embedder.timeout_s", {}},
      {"embedder.retries", {}},
      {"embedder.api_key_env", {}},
      {"cache.batch_size", {}},
      {"cache.max_rows_per_s", {}},
      {"cache.read_buffer_mb", {}},         // how the reader buffers, not what it reads
      {"cache.clean_train_reference", {}},  // permits a step; adds a clean cache, changes no existing one
      {"corpus.sort_buffer_mb", {}},
      {"dae.table_wiener_rows", {"wiener-inverter"}},  // the evaluation's table, and the filter the baseline trains on
      // `eval` writes its results whole from what it evaluated now; nothing it reads depends on these.
      {"eval.", {}},
      {"correct.", {}},
      {"zsinvert.", {}},                    // the search runs in eval; enabled only adds the lm step
      {"server.", {}},
      {"estimate.", {}},
      // What the attack computes.
      {"run.seed", everything()},
      {"corpus.", {"corpus"}},
      {"embedder.", {"cache"}},
      {"cache.", {"cache"}},
      {"dae.", {"stage1"}},
      {"stage1.", {"stage1"}},
      {"inverter.vocab_size", {"tokenizer"}},
      {"inverter.tokenizer", {"tokenizer"}},
      {"inverter.spm_sentences", {"tokenizer"}},
      // Where every fresh inverter starts: the inverters, then what starts from them and their hypotheses.
      {"inverter.init_from", with_hypotheses(with_downstream([](const StageSpec& s) { return s.fresh_inverter; }))},
      {"inverter.", stage_folders([](const StageSpec& s) { return s.t5; })},
      // Whole keys: a prefix without its trailing dot matches a key or its sub-keys only, so "stage2.noisy_" would
      // match nothing and leave these to "stage2." below (which refused a budget switch on a run with stage 2 saved).
      {"stage2.noisy_steps", {"noisy-inverter"}},
      {"stage2.noisy_lr", {"noisy-inverter"}},
      {"stage2.", budget_of("stage2")},  // the baselines share stage 2's budget
      {"reference.corrector", {}},  // whether the clean corrector runs, not what any saved work computed
      {"reference.embedder", {"cache/*/clean"}},  // the clean rows of the caches (their noisy rows do not read it)
      {"reference.", {"clean-inverter"}},
      {"stage3.control", {}},          // whether the control runs, not what any saved work computed
      {"stage2.wiener_inverter", {}},  // whether the linear reference runs, not what any saved work computed
      {"stage3.lambda_max", {"stage3"}},
      {"stage3.lambda_warmup_steps", {"stage3"}},
      {"stage3.pcgrad", {"stage3"}},
      {"stage3.lr_dae", {"stage3"}},
      {"stage3.dae_clip_norm", {"stage3"}},
      {"stage3.steps", plus(budget_of("stage3"), {"noisy-inverter"})},  // noisy-inverter: stage 2 + 3's steps
      {"stage3.", budget_of("stage3")},  // the control shares stage 3's budget
      {"hypotheses.", hypothesis_caches()},
      {"protocol.clean_hypotheses", {"cache/hyp-train", "stage4"}},  // the daei chain's hypotheses and corrector
      {"stage4.continued_corrector", {}},  // whether that corrector runs, not what any saved work computed
      {"stage4.", budget_of("stage4")},  // every corrector shares stage 4's budget
      {"lm.", {"lm"}},           // zsinvert's generator
      {"bow.enabled", {}},       // whether the bag-of-words rows run, not what any saved work computed
      // The bag-of-words inverters share one budget (k_max, k_rows: their final k); the guided inverters' fold models
      // are trained on it too.
      {"bow.", plus(budget_of("bow"), {"guided-noisy", "guided-dae", "guided-clean"})},
      {"guided.enabled", {}},  // whether the guided rows run, not what any saved work computed
      {"guided.", {"guided-noisy", "guided-dae", "guided-clean"}},
      {"embedder_train.", {"embedder"}},  // the contextual embedder (a GTR stand-in)
      // Where every fresh inverter and corrector starts (warm-started correctors and stage 3 follow their inverter).
      {"pretrain.", stage_folders([](const StageSpec& s) { return s.pretrain_fed; })},
      // The attack's trained models (stages::attack_seed); the corpus, caches, pretrain, lm and embedder keep run.seed.
      {"train.seed", with_hypotheses(stage_folders([](const StageSpec& s) { return s.seeded; }))},
      {"train.", all_stages()},
  };
  return r;
}

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// A folder holding any file but a lock file (a cache split's .lock is left by a build refused before it wrote).
bool non_empty_dir(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_directory(p, ec)) return false;
  for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (!it->is_directory(ec) && it->path().filename() != ".lock") return true;
  return false;
}

}  // namespace

std::vector<std::string> work_depending_on(const std::string& key) {
  for (const auto& r : rules())
    if (r.prefix.back() == '.' ? starts_with(key, r.prefix) : (key == r.prefix || starts_with(key, r.prefix + ".")))
      return r.entries;
  return everything();
}

bool has_saved_work(const std::string& run_dir, const std::string& entry) {
  if (entry == "cache/*/clean") {  // any split's clean rows
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(run_dir) / "cache", ec))
      if (non_empty_dir(e.path() / "clean")) return true;
    return false;
  }
  const fs::path dir = fs::path(run_dir) / entry;
  if (std::find(all_stages().begin(), all_stages().end(), entry) != all_stages().end()) {
    // A stage folder may hold only a lock file or an archived earlier run (--force); work is a checkpoint or final.
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return false;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string n = e.path().filename().string();
      if ((n == "final" || starts_with(n, "ckpt-")) && fs::exists(e.path() / "DONE")) return true;
    }
    return false;
  }
  return non_empty_dir(dir);
}

ConfigChanges compare_with_saved(const std::string& run_dir, const Config& now) {
  ConfigChanges out;
  const std::string path = RunLayout(run_dir).config();
  if (!file_exists(path)) return out;
  Config before = Config::defaults();
  try {
    YAML::Node saved = YAML::LoadFile(path);
    // Retired keys a run's saved config may still hold (train.amp: replaced by train.precision, which changes no
    // saved work either): dropped, so that such runs are still compared.
    if (saved["train"] && saved["train"].IsMap() && saved["train"]["amp"]) saved["train"].remove("amp");
    before.merge_yaml(saved, path);
  } catch (const std::exception& e) {
    LOG_WARN("[main] cannot compare with the saved config {}: {}", path, e.what());
    return out;
  }
  for (const auto& key : Config::diff(before, now)) {
    std::vector<std::string> holding;
    for (const auto& entry : work_depending_on(key))
      if (has_saved_work(run_dir, entry)) holding.push_back(entry + "/");
    if (holding.empty())
      out.accepted.push_back(key);
    else
      out.refused.push_back(fmt::format("{} ({} {} work)", key, fmt::join(holding, ", "),
                                        holding.size() == 1 ? "holds" : "hold"));
  }
  return out;
}

SavedConfig save_config(const std::string& run_dir, const Config& now, bool changed) {
  SavedConfig s;
  const RunLayout layout(run_dir);
  const std::string path = layout.config();
  if (file_exists(path)) {
    s.previous = read_file(path);
    if (changed) {
      char stamp[32];
      const std::time_t t = std::time(nullptr);
      std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", std::gmtime(&t));
      make_dirs(layout.config_history());
      s.history_file = layout.config_history() + "/" + stamp + ".yaml";
      for (int i = 1; file_exists(s.history_file); ++i)
        s.history_file = fmt::format("{}/{}-{}.yaml", layout.config_history(), stamp, i);
      write_file_atomic(s.history_file, *s.previous);
    }
  }
  now.save(path);
  return s;
}

void restore_config(const std::string& run_dir, const SavedConfig& saved) {
  const std::string path = RunLayout(run_dir).config();
  try {
    if (saved.previous)
      write_file_atomic(path, *saved.previous);
    else
      fs::remove(path);
    if (!saved.history_file.empty()) fs::remove(saved.history_file);
  } catch (const std::exception& e) {
    LOG_WARN("[main] cannot restore {}: {}", path, e.what());
  }
}

}  // namespace daei::cli
