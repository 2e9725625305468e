// The flags of the pipeline's step commands (see commands.h): declared once here, for the command line and for the
// pipeline's --dry-run, so what a step prints is what it runs.
#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <fmt/ranges.h>

#include "stages/recipes/catalogue.h"

namespace daei::cli {

void add_flags(CLI::App& app, CorpusBuildCommand& o) {
  app.add_flag("--force", o.force, "rebuild even when the corpus exists");
}

void add_flags(CLI::App& app, CacheBuildCommand& o) {
  app.add_option("--split", o.split, "train, val, test, ood-fortunes, ...")->required();
  app.add_flag("--clean", o.clean, "also write clean embeddings (offline evaluation only) to cache/SPLIT/clean");
}

void add_flags(CLI::App& app, TrainCommand& o) {
  std::vector<std::string> names;
  for (const auto& s : stage_catalogue()) names.push_back(s.name);
  app.add_option("--stage", o.stage, fmt::format("{}", fmt::join(names, " | ")))->required();
  add_resume_flags(app, o);
}

void add_resume_flags(CLI::App& app, TrainCommand& o) {
  app.add_flag("--resume", o.resume, "continue from the newest complete checkpoint");
  app.add_flag("--force", o.force, "start again over an earlier run's checkpoints (archived, not deleted)");
}

void add_flags(CLI::App& app, HypothesesCommand& o) {
  app.add_option("--for", o.for_stage, "whose data: 4 (daei, default) | dae-corrector | dae-continued-corrector | noisy-corrector | clean-corrector");
}

void add_flags(CLI::App& app, EvalCommand& o) {
  app.add_flag("--dae-only", o.dae_only, "only the DAE table (eval/dae.json)");
  app.add_option("--split", o.split_files,
                 "a JSON-lines file of texts ({\"text\": ...}) to embed, noise and evaluate like a split (repeatable)");
  app.add_option("--sigma", o.sigmas, "noise sweep: comma-separated σ list (eval/sigma_sweep.{json,md,png})");
}

namespace {
std::string flag(bool on, const char* name) { return on ? std::string(" ") + name : ""; }
std::string without_leading_space(const std::string& s) { return s.empty() ? s : s.substr(1); }
}  // namespace

std::string command_args(const CorpusBuildCommand& c) { return without_leading_space(flag(c.force, "--force")); }

std::string command_args(const CacheBuildCommand& c) { return "--split " + c.split + flag(c.clean, "--clean"); }

std::string command_args(const TrainCommand& c) {
  return "--stage " + c.stage + flag(c.resume, "--resume") + flag(c.force, "--force");
}

std::string command_args(const HypothesesCommand& c) { return "--for " + c.for_stage; }

std::string command_args(const EvalCommand& c) {
  std::string s = flag(c.dae_only, "--dae-only");
  for (const auto& f : c.split_files) s += " --split " + f;
  if (!c.sigmas.empty()) s += " --sigma " + c.sigmas;
  return without_leading_space(s);
}

}  // namespace daei::cli
