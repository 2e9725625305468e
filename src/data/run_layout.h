// The run directory's layout (DESIGN.md, "Run directory"): every path under runs/NAME is derived here and nowhere
// else, and here alone is answered whether a step's output is complete. Subcommands, stages and evaluation ask a
// RunLayout for a path instead of concatenating strings, so a folder can move in one place.
//
//   config.yaml, config.history/, daei.log
//   corpus/SPLIT.jsonl, corpus/stats.json
//   cache/SPLIT/ (manifest.json written last = complete), cache/SPLIT/clean/, cache/sigma_estimate.json
//   tokenizer/spm.model
//   STAGE/final/MODULE/ (complete when final/DONE verifies), STAGE/ckpt-*/
//   eval/results.json, eval/...
#pragma once
#include <string>

namespace daei {

class RunLayout {
 public:
  explicit RunLayout(std::string run_dir);
  const std::string& root() const { return root_; }

  std::string config() const;              // config.yaml: the resolved config, saved at start
  std::string config_history() const;      // config.history/: earlier config.yaml files
  std::string log_file() const;            // daei.log

  std::string corpus_dir() const;          // corpus/
  std::string corpus(const std::string& split) const;  // corpus/SPLIT.jsonl
  std::string corpus_stats() const;        // corpus/stats.json: written last by `corpus build`

  std::string cache(const std::string& split) const;           // cache/SPLIT
  std::string cache_manifest(const std::string& split) const;  // cache/SPLIT/manifest.json
  std::string clean_cache(const std::string& split) const;     // cache/SPLIT/clean (offline evaluation only)
  std::string clean_cache_manifest(const std::string& split) const;
  bool cache_complete(const std::string& split) const;         // its manifest exists (written last)
  bool clean_cache_complete(const std::string& split) const;
  std::string sigma_estimate() const;      // cache/sigma_estimate.json: σ̂ of a remote release

  std::string tokenizer_dir() const;       // tokenizer/
  std::string tokenizer_model() const;     // tokenizer/spm.model
  // The tokenizer a run uses: `given` (inverter.tokenizer) when set, else the one trained into the run.
  std::string tokenizer_for(const std::string& given) const { return given.empty() ? tokenizer_model() : given; }

  // A training step's folder (stage1, stage2, stage3, noisy-inverter, lm, ...), its final/ and a module in it.
  std::string stage(const std::string& name) const;
  std::string stage_final(const std::string& name) const;
  std::string final_module(const std::string& stage_name, const std::string& module) const;
  std::string final_dae(const std::string& stage_name) const { return final_module(stage_name, "dae"); }
  std::string final_inverter(const std::string& stage_name) const { return final_module(stage_name, "inverter"); }
  // The noisy-only Wiener filter the wiener-inverter baseline trains and is evaluated on (wiener-inverter/wiener.safetensors).
  std::string wiener_filter() const { return stage("wiener-inverter") + "/wiener.safetensors"; }
  // final/ written to the end and verified (a truncated final is not complete; a warning says why).
  bool stage_complete(const std::string& name) const;

  std::string eval_dir() const;                          // eval/
  std::string eval_file(const std::string& name) const;  // eval/NAME (results.json, sigma_sweep.md, ...)

 private:
  std::string root_;
};

// The final/ folder inside a stage folder (what the Trainer writes last).
std::string stage_final_dir(const std::string& stage_dir);
// A folder written to completion (a checkpoint, a stage's final/): DONE present and every file it lists has its
// recorded SHA-256. "" when good, else what is wrong.
std::string verify_done_folder(const std::string& dir);

}  // namespace daei
