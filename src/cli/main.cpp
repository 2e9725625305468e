// daei: thin main. Parses the command line, starts MPI and logging, resolves the layered config, then hands over
// to the registered subcommand. Exit codes: 0 ok, 1 error, 2 usage, 75 stopped on request after a checkpoint.
#include <hdf5.h>
#include <torch/cuda.h>
#include <torch/version.h>
#include <c10/util/Exception.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <fmt/ranges.h>
#include <map>
#include <new>
#include <optional>

#include "build_info.h"
#include "cli/app.h"
#include "cli/config_guard.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/signals.h"
#include "data/run_layout.h"
#include "dist/launch.h"
#ifdef DAEI_NCCL_COMMUNICATOR
#include "dist/nccl_raw.h"
#endif
#include "model/net/precision.h"
#include "model/release/release.h"
#include "model/net/t5_kernels.h"

namespace daei::cli {
namespace {

std::vector<SubcommandSpec>& registry() {
  static std::vector<SubcommandSpec> r;
  return r;
}

struct CommonOptions {
  std::string config_file;
  std::vector<std::string> sets;
  bool dump_config = false;
  bool log_all_ranks = false;
};

void add_common(CLI::App& app, CommonOptions& o) {
  app.add_option("--config", o.config_file, "YAML config file layered over the built-in defaults");
  app.add_option("--set", o.sets, "override one key: --set a.b=value (repeatable)")->take_all();
  app.add_flag("--dump-config", o.dump_config, "print the resolved config and exit");
  app.add_flag("--log-all-ranks", o.log_all_ranks, "log info from every rank, not only rank 0");
}

std::string library_versions() {
  const std::string mpi = mpi_library_version();
  unsigned h5a, h5b, h5c;
  H5get_libversion(&h5a, &h5b, &h5c);
  std::string s = fmt::format("libtorch {}, {}, HDF5 {}.{}.{}", TORCH_VERSION, mpi, h5a, h5b, h5c);
#ifdef DAEI_NCCL_COMMUNICATOR
  s += fmt::format(", NCCL {} (communicator built)", nccl_raw::version_code());
#else
  s += std::string(DAEI_NCCL_HEADER).empty() ? ", NCCL not compiled"
                                             : ", NCCL raw layer compiled; communicator needs a CUDA libtorch";
#endif
  return s;
}

// `daei --version`: the build, its libraries and the communicator backends it has, and what this machine offers.
std::string version_text() {
#ifdef DAEI_NCCL_COMMUNICATOR
  const bool nccl = true;
#else
  const bool nccl = false;
#endif
  const int devices = DAEI_TORCH_CUDA_BUILD ? static_cast<int>(torch::cuda::device_count()) : 0;
  return fmt::format("daei {}\n{}\nlibtorch CUDA: {}\nbackends: local, mpi{}\nCUDA devices here: {}{}",
                     DAEI_GIT_REV, library_versions(), DAEI_TORCH_CUDA_BUILD ? "yes" : "no (CPU-only build)",
                     nccl ? ", nccl" : "", devices, devices == 0 ? " (the CPU is used)" : "");
}

std::string current_git_rev() { return DAEI_GIT_REV; }  // the build's commit (+ "-dirty"), written at build time

// Single-process commands run without MPI; refuse them under a multi-rank launch (each rank would serve, bind…).
void refuse_multi_rank_launch(const SubcommandSpec& spec) {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"}) {
    const char* n = std::getenv(v);
    if (n && std::atoi(n) > 1) {
      // MPI is not started, so the ranks cannot agree on who reports: the launcher's rank 0 does, the others
      // leave quietly with the same exit code.
      for (const char* r : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
        if (const char* x = std::getenv(r); x && std::atoi(x) != 0) std::exit(kExitUsage);
      throw UsageError(fmt::format("`daei {}` is a single-process command: run it without mpirun ({}={})",
                                   fmt::join(spec.path, " "), v, n));
    }
  }
}

int run_subcommand(const SubcommandSpec& spec, const BoundCommand& command, CommonOptions& opt, int argc,
                   char** argv) {
  // Training honours a stop request (USR1/TERM → checkpoint → exit 75) from its first moment: a signal during start-up
  // (MPI, data, checkpoint load) is acted on at the first step boundary instead of killing the rank.
  if (spec.path.front() == "train" || spec.path.front() == "pipeline") signals::install_stop_handlers();
  ProcessInfo proc;
  if (spec.single_process) {
    refuse_multi_rank_launch(spec);
  } else {
    proc = start_ranks(&argc, &argv);  // src/dist/launch.h
  }
  logging::init(proc.rank, proc.world, opt.log_all_ranks);
  Config config = Config::load(opt.config_file, opt.sets);  // validated: a bad value stops here, nothing written
  if (opt.dump_config) {
    if (proc.rank == 0) std::cout << config.dump();
    return kExitOk;
  }
  logging::init(proc.rank, proc.world, opt.log_all_ranks || config.flag("log.all_ranks"), config.str("log.level"));
  auto comm = spec.single_process ? std::make_unique<LocalCommunicator>() : make_communicator(config, proc);
  // The commands that run the attacker's T5 models multiply in train.precision; a bf16 that neither the CPU nor
  // CUDA has natively is refused here, before anything is written. auto's measurement is averaged over the ranks,
  // so that all of them multiply alike.
  static const std::vector<std::string> t5_commands = {"train", "pretrain", "hypotheses", "eval",
                                                       "invert", "zsinvert", "pipeline"};
  std::string precision_line;  // logged once the run's daei.log is open: a run's log says what it multiplied in
  if (std::find(t5_commands.begin(), t5_commands.end(), spec.path.front()) != t5_commands.end()) {
    Communicator* c = comm.get();
    configure_precision(config, [c](double v) { return c->allreduce(v, ReduceOp::Avg); }, &precision_line);
    if (config.str("train.precision") == "fp32") precision_line.clear();  // the default says nothing
  }
  const std::string run_dir = (std::filesystem::path(config.str("run.root")) / config.str("run.name")).string();
  Context ctx(std::move(config), std::move(comm), proc, run_dir);
  if (command.validate) command.validate(ctx);
  // Resuming a run with a config that differs from the saved one: every rank reads and refuses alike, before
  // anything is written.
  ConfigChanges changes;
  if (spec.uses_run_dir) {
    changes = compare_with_saved(ctx.run_dir, ctx.config);
    // --force (corpus build, train) redoes the command's own work; the command decides, the change is logged.
    const bool forced = command.forced();
    if (!changes.refused.empty() && !forced)
      throw UsageError(fmt::format(
          "the config differs from {}/config.yaml in keys that would invalidate saved work: {}. Keep the saved "
          "values, start a new run (run.name), remove those folders, or pass --force to the command that redoes them",
          ctx.run_dir, fmt::join(changes.refused, "; ")));
    if (!changes.refused.empty())
      LOG_WARN("[main] --force: the config changes saved work: {}; work of other steps may now be stale",
               fmt::join(changes.refused, "; "));
  }
  if (spec.uses_run_dir && ctx.proc.rank == 0) {
    make_dirs(ctx.run_dir);
    logging::add_file(RunLayout(ctx.run_dir).log_file());
  }
  std::string cmdline;
  for (int i = 0; i < argc; ++i) cmdline += (i ? " " : "") + std::string(argv[i]);
  LOG_INFO("[main] {}", cmdline);
  ctx.command_line = cmdline;
  LOG_INFO("[main] daei {} | {}", current_git_rev(), library_versions());
  if (!precision_line.empty()) LOG_INFO("[precision] {}", precision_line);
  auto hosts = ctx.comm->allgather(fmt::format("{}:{}(local {})", ctx.proc.rank, ctx.proc.host, ctx.proc.local_rank));
  std::string map;
  for (auto& h : hosts) map += (map.empty() ? "" : ", ") + h;
  LOG_INFO("[dist] {} backend, world {}: {}", ctx.comm->kind(), ctx.comm->size(), map);
  if (!changes.accepted.empty())
    LOG_WARN("[main] config differs from {}/config.yaml in keys that change no saved work (accepted): {}",
             ctx.run_dir, fmt::join(changes.accepted, ", "));
  // config.yaml is written only after validation, and by a command that locks its folder only once it holds the
  // lock (commits_config): a refused command leaves the run's config.yaml as it was.
  SavedConfig saved;
  bool committed = false;
  const bool saves = spec.uses_run_dir && ctx.proc.rank == 0;
  const bool changed = !changes.accepted.empty() || !changes.refused.empty();
  ctx.commit_config = [&] {
    if (!saves || committed) return;
    committed = true;
    saved = save_config(ctx.run_dir, ctx.config, changed);
    if (!saved.history_file.empty()) LOG_INFO("[main] the previous config is kept as {}", saved.history_file);
  };
  if (!spec.commits_config) ctx.commit_config();
  try {
    return command.run(ctx);
  } catch (const UsageError&) {
    if (committed) restore_config(ctx.run_dir, saved);  // refused: the run directory keeps the config it had
    throw;
  }
}

// One line for any exception: libtorch's errors carry a C++ backtrace after the message, allocation failures say
// how many bytes were asked for.
std::string one_line(const std::exception& e) {
  std::string m;
  if (auto* c = dynamic_cast<const c10::Error*>(&e)) {
    m = c->what_without_backtrace();
  } else if (dynamic_cast<const std::bad_alloc*>(&e)) {
    m = "out of memory (std::bad_alloc): the model or batch does not fit; reduce dae.hidden / batch sizes";
  } else {
    m = e.what();
  }
  if (m.rfind("[enforce fail at", 0) == 0)
    if (auto p = m.find("] "); p != std::string::npos) m = m.substr(p + 2);
  if (auto nl = m.find('\n'); nl != std::string::npos) m = m.substr(0, nl);
  if (m.find("allocate") != std::string::npos && m.find("bytes") != std::string::npos &&
      m.find("out of memory") == std::string::npos)
    m = "out of memory: " + m;
  return m;
}

}  // namespace

const Release& Context::release() {
  if (!release_) release_ = std::make_shared<const Release>(Release::of_run(config, RunLayout(run_dir).sigma_estimate()));
  return *release_;
}

int register_subcommand(SubcommandSpec spec) {
  registry().push_back(std::move(spec));
  return static_cast<int>(registry().size());
}
const std::vector<SubcommandSpec>& subcommands() { return registry(); }

}  // namespace daei::cli

int main(int argc, char** argv) {
  // First, before any other HDF5 call (it has no effect once HDF5 is initialised). HDF5 1.10.8, Debian 12's, has a
  // bug (HDFGroup/hdf5#2257, fixed upstream in 2023): an H5Fclose that fails (ENOSPC while a shard is flushed: a full
  // disk, or two ranks filling it at once) frees the file but keeps its ID, and HDF5's atexit handler
  // H5_term_library closes it again: SIGSEGV after the error was reported (issue 32, e2e_bad_disk). daei closes every
  // HDF5 object it opens (Hid), so the exit-time sweep has nothing else to do.
  H5dont_atexit();
  daei::configure_allocator();  // malloc keeps freed blocks (DAEI_MALLOC=default turns it off; bench/results.md)
  using namespace daei;
  using namespace daei::cli;
  CLI::App app{"daei: measure how much text leaks from noise-protected text embeddings (DAEI attack)"};
  app.set_version_flag("--version", [] { return version_text(); });
  app.require_subcommand(0, 1);
  CommonOptions opt;
  add_common(app, opt);

  // Build the (possibly nested) subcommands from the registry.
  std::map<std::string, CLI::App*> nodes;
  struct Leaf {
    const SubcommandSpec* spec;
    BoundCommand command;  // reads the options struct that parsing this leaf fills
  };
  std::map<CLI::App*, Leaf> leaves;
  for (const auto& spec : subcommands()) {
    CLI::App* parent = &app;
    std::string key;
    for (size_t i = 0; i < spec.path.size(); ++i) {
      key += "/" + spec.path[i];
      auto it = nodes.find(key);
      if (it == nodes.end()) {
        bool leaf = i + 1 == spec.path.size();
        auto* sub = parent->add_subcommand(spec.path[i], leaf ? spec.help : "");
        if (!leaf) sub->require_subcommand(1, 1);
        it = nodes.emplace(key, sub).first;
      }
      parent = it->second;
    }
    parent->description(spec.help);
    // A group (e.g. `cache`) lists its subcommands in its one-line description.
    for (size_t i = 0; i + 1 < spec.path.size(); ++i) {
      CLI::App* group = nodes.at(fmt::format("/{}", fmt::join(spec.path.begin(), spec.path.begin() + i + 1, "/")));
      std::string d = group->get_description();
      d += (d.empty() ? "subcommands: " : ", ") + spec.path[i + 1];
      group->description(d);
    }
    add_common(*parent, opt);
    leaves[parent] = Leaf{&spec, spec.add_options(*parent)};
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }

  const Leaf* chosen = nullptr;
  for (auto& [node, leaf] : leaves)
    if (node->parsed()) chosen = &leaf;

  int rc = kExitOk;
  try {
    t5_speed();  // reads DAEI_T5_KERNELS once: a bad value stops here, before any command writes
    if (chosen) {
      rc = run_subcommand(*chosen->spec, chosen->command, opt, argc, argv);
    } else if (opt.dump_config) {
      std::cout << Config::load(opt.config_file, opt.sets).dump();
    } else {
      std::cout << app.help();
      rc = kExitUsage;
    }
  } catch (const UsageError& e) {
    rc = report_failure(e.what(), kExitUsage);
  } catch (const std::exception& e) {
    rc = report_failure(one_line(e), kExitError);
  }
  MpiProcess::finalize();
  return rc;
}
