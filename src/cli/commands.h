// The options of the subcommands that `daei pipeline` runs as its steps. Each struct is what the subcommand's parser
// fills from the command line; the pipeline builds one afresh for each step and calls the same functions, so a step
// runs exactly as the command a user would type, and no flag carries over from one step to the next.
#pragma once
#include <string>
#include <vector>

#include "cli/app.h"

namespace daei::cli {

struct CorpusBuildCommand {  // daei corpus build
  static constexpr const char* kName = "corpus build";
  bool force = false;  // rebuild even when the corpus exists
};

struct CacheBuildCommand {  // daei cache build
  static constexpr const char* kName = "cache build";
  std::string split;
  bool clean = false;  // also write the clean embeddings (offline evaluation only)
};

struct TrainCommand {  // daei train
  static constexpr const char* kName = "train";
  std::string stage;
  bool resume = false;
  bool force = false;  // start again over an earlier run's checkpoints (archived)
};

struct HypothesesCommand {  // daei hypotheses
  static constexpr const char* kName = "hypotheses";
  std::string for_stage = "4";  // --for: whose corrector's data
};

struct EvalCommand {  // daei eval
  static constexpr const char* kName = "eval";
  bool dae_only = false;
  std::vector<std::string> split_files;  // --split FILE (repeatable)
  std::string sigmas;                    // --sigma: comma-separated σ list for the noise sweep
};

// The flags of each command, bound to its struct (the parser of `daei CMD` and of the tests).
void add_flags(CLI::App& app, CorpusBuildCommand& o);
void add_flags(CLI::App& app, CacheBuildCommand& o);
void add_flags(CLI::App& app, TrainCommand& o);
void add_resume_flags(CLI::App& app, TrainCommand& o);  // --resume, --force (add_flags has them beside --stage)
void add_flags(CLI::App& app, HypothesesCommand& o);
void add_flags(CLI::App& app, EvalCommand& o);

// The flags that give the same struct when parsed (what `pipeline --dry-run` prints for a step).
std::string command_args(const CorpusBuildCommand& c);
std::string command_args(const CacheBuildCommand& c);
std::string command_args(const TrainCommand& c);
std::string command_args(const HypothesesCommand& c);
std::string command_args(const EvalCommand& c);

// What main does with a parsed command after loading the config: validate (before anything is written), then run.
void validate_command(Context& ctx, const TrainCommand& c);
void validate_command(Context& ctx, const HypothesesCommand& c);
void validate_command(Context& ctx, const EvalCommand& c);
inline void validate_command(Context&, const CorpusBuildCommand&) {}
inline void validate_command(Context&, const CacheBuildCommand&) {}
int run_command(Context& ctx, const CorpusBuildCommand& c);
int run_command(Context& ctx, const CacheBuildCommand& c);
int run_command(Context& ctx, const TrainCommand& c);
int run_command(Context& ctx, const HypothesesCommand& c);
int run_command(Context& ctx, const EvalCommand& c);

}  // namespace daei::cli
