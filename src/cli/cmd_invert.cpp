// daei invert --input FILE [--output FILE] [--system NAME]: texts recovered from noisy embeddings with one of the
// run's trained rows — by default the strongest attack (the daei system, stage 4 corrector querying the configured
// black box, when trained, else the stage-3 or stage-2 inverter behind its DAE); `--list` prints the rows the run
// has. Input: JSON lines {"embedding": [...]} or .npy (float32/float64, [n, d]).
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/embedding_input.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "data/run_layout.h"
#include "eval/systems.h"
#include "model/release/release.h"

namespace daei::cli {
namespace {

struct InvertCommand {
  EmbeddingFiles files;
  std::string system;  // --system: a row of the run (default: the strongest attack)
  bool list = false;   // --list: print the rows and exit
};

void add_flags(CLI::App& app, InvertCommand& cmd) {
  add_embedding_files(app, cmd.files);
  app.get_option("--input")->required(false);  // --list needs none
  app.add_option("--system", cmd.system, "the row to invert with (`--list` shows them; default: the strongest attack)");
  app.add_flag("--list", cmd.list, "print the rows this run can invert with, and exit");
}

void validate(Context&, const InvertCommand& cmd) {
  if (cmd.list) return;
  if (cmd.files.input.empty()) throw UsageError("invert: --input is required (or --list)");
  DAEI_CHECK(file_exists(cmd.files.input), "invert: {}: no such file", cmd.files.input);
}

// The row named by --system, or the strongest attack: the last of the DAE chain (not a reference, a no-DAE baseline,
// zsinvert or a bag-of-words row, which answers with words, not a text).
const SystemSpec* pick_system(const std::vector<SystemSpec>& systems, const std::string& name) {
  const auto starts = [](const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; };
  const SystemSpec* pick = nullptr;
  for (const auto& s : systems)
    if (name.empty() ? !s.reference && !starts(s.name, "noisy-") && !starts(s.name, "zsinvert") && !starts(s.name, "bow-")
                     : s.name == name)
      pick = &s;
  return pick;
}

int run(Context& ctx, const InvertCommand& cmd) {
  if (!ctx.comm->is_root()) return kExitOk;
  torch::set_num_threads(static_cast<int>(ctx.config.integer("train.threads")));
  EvalContext ec = make_eval_context(ctx.config, ctx.run_dir, ctx.release());
  auto systems = available_systems(ec);
  if (cmd.list) {
    const SystemSpec* strongest = pick_system(systems, "");
    for (const auto& s : systems)
      std::cout << s.name << (s.reference ? "  (reference, outside the threat model)" : "")
                << (&s == strongest ? "  (default)" : "") << "\n";
    return kExitOk;
  }
  at::Tensor y = read_embeddings(cmd.files.input, "invert");
  const SystemSpec* best = pick_system(systems, cmd.system);
  if (!cmd.system.empty() && !best) {
    std::vector<std::string> names;
    for (const auto& s : systems) names.push_back(s.name);
    throw UsageError(fmt::format("invert: --system {} is not trained in {}; it has: {}", cmd.system, ctx.run_dir,
                                 fmt::join(names, ", ")));
  }
  DAEI_CHECK(best, "invert: no trained attack in {} (train stage 2 first)", ctx.run_dir);
  int64_t d = 0;  // every inverter of a run reads the release's dimension
  for (const auto& inv : {ec.inverter("stage3"), ec.inverter("stage2"), ec.inverter("noisy-inverter"), ec.inverter("clean-inverter")})
    if (inv && !d) d = inv->cfg.dim;
  DAEI_CHECK(y.size(1) == d, "invert: {}: embeddings have dimension {}, the trained attack expects {}", cmd.files.input,
             y.size(1), d);
  EvalSplit sp;
  sp.name = "invert";
  sp.noisy = y;
  sp.clean = y;
  sp.sigma = ctx.release().sigma();  // the σ the release noised them at
  sp.texts.assign(static_cast<size_t>(y.size(0)), "");
  auto run = best->recover(sp);
  std::string out;
  for (size_t i = 0; i < run.texts.size(); ++i)
    out += nlohmann::json{{"text", run.texts[i]}, {"system", best->name},
                          {"queries", run.queries.empty() ? 0.0 : run.queries[i]}}.dump() + "\n";
  write_recovered("invert", cmd.files, out, run.texts.size(), best->name);
  return kExitOk;
}

DAEI_SUBCOMMAND(SubcommandSpec{{"invert"},
                               "texts recovered from noisy embeddings (JSON lines {\"embedding\": [...]} or .npy) "
                               "with the run's trained attack",
                               bind_options<InvertCommand>(add_flags, run, validate)});

}  // namespace
}  // namespace daei::cli
