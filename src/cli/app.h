// The subcommand registry. Each src/cli/cmd_*.cpp registers itself with DAEI_SUBCOMMAND; main builds the command
// line from what is registered, so `daei --help` lists exactly the subcommands that exist.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "dist/mpi_process.h"

namespace CLI {
class App;
}

namespace daei {
class Release;
}

namespace daei::cli {

// What every subcommand reads. Built once the config is loaded and the ranks are started: the constructor takes
// every member a command dereferences (comm is never null; the release is resolved from the config at first use),
// so no path can hand a command a half-filled one (issue 64).
struct Context {
  Context(Config config_, std::unique_ptr<Communicator> comm_, ProcessInfo proc_, std::string run_dir_)
      : config(std::move(config_)), comm(std::move(comm_)), proc(std::move(proc_)), run_dir(std::move(run_dir_)) {
    DAEI_ASSERT(comm != nullptr, "cli::Context built without a communicator");
  }

  Config config;
  std::unique_ptr<Communicator> comm;  // never null
  ProcessInfo proc;
  std::string run_dir;  // run.root/run.name
  std::string command_line;  // argv joined (recorded in results)
  // Writes the run's config.yaml (rank 0; once: later calls do nothing). main calls it before `run`, unless the
  // command saves it itself (SubcommandSpec::commits_config) once it holds its folder's lock.
  std::function<void()> commit_config = [] {};

  // The release the run attacks, with its σ (Release::of_run: embedder.sigma, or a remote release's σ̂ from the run's
  // estimate), resolved at the first call and passed down from there: the same for the whole command. `cache build`
  // writes the estimate before its first call.
  const Release& release();

 private:
  std::shared_ptr<const Release> release_;
};

// A subcommand's calls, bound to the options struct its parser fills (one struct per parser: two parses share
// nothing, so no flag carries over from one to the next).
struct BoundCommand {
  // Checks of the command's own flags and of the config against them (every rank, the same way), run after the
  // config is loaded and validated and before anything is written: a UsageError here leaves the run directory
  // untouched. (A UsageError thrown later by `run` restores config.yaml as it was.) May be empty.
  std::function<void(Context&)> validate;
  std::function<int(Context&)> run;
  // The parsed --force of a command that has one: it redoes the command's own work, so main lets config changes
  // to that work through (logged) instead of refusing them.
  std::function<bool()> forced = [] { return false; };
};

struct SubcommandSpec {
  std::vector<std::string> path;  // {"cache", "build"}
  std::string help;
  std::function<BoundCommand(CLI::App&)> add_options;  // adds the flags, bound to a fresh options struct
  bool uses_run_dir = true;       // save config.yaml and log to run_dir/daei.log
  // One process, no MPI (embed, serve-embedder, estimate-sigma): MPI is not initialised, so no MPI networking
  // (TCP listeners on every interface) is started; under mpirun with more than one rank the command refuses.
  bool single_process = false;
  // The command locks the folder it writes and checks it before config.yaml is saved: it calls ctx.commit_config()
  // then, so a command refused by the lock (another process at work) or by that check leaves config.yaml as it was.
  bool commits_config = false;
};

// An options struct with a `force` member: the command has --force (see BoundCommand::forced).
template <class Options, class = void>
struct has_force_flag : std::false_type {};
template <class Options>
struct has_force_flag<Options, std::void_t<decltype(Options::force)>> : std::true_type {};

// The add_options of a subcommand whose flags fill an `Options` struct: `add` declares the flags on the struct,
// `run` and `validate` (optional) read it once parsed.
template <class Options>
std::function<BoundCommand(CLI::App&)> bind_options(void (*add)(CLI::App&, Options&),
                                                    int (*run)(Context&, const Options&),
                                                    void (*validate)(Context&, const Options&) = nullptr) {
  return [add, run, validate](CLI::App& app) {
    auto options = std::make_shared<Options>();
    add(app, *options);
    BoundCommand c;
    c.run = [options, run](Context& ctx) { return run(ctx, *options); };
    if (validate) c.validate = [options, validate](Context& ctx) { validate(ctx, *options); };
    if constexpr (has_force_flag<Options>::value) c.forced = [options] { return options->force; };
    return c;
  };
}

int register_subcommand(SubcommandSpec spec);
const std::vector<SubcommandSpec>& subcommands();

}  // namespace daei::cli

#define DAEI_CONCAT_INNER(a, b) a##b
#define DAEI_CONCAT(a, b) DAEI_CONCAT_INNER(a, b)
#define DAEI_SUBCOMMAND(...) \
  static const int DAEI_CONCAT(daei_subcommand_, __LINE__) = ::daei::cli::register_subcommand(__VA_ARGS__)
