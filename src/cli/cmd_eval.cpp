// daei eval: the leakage table over every trained system and split (eval/results.json, results.md, samples.md);
// --dae-only: the DAE table alone.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "data/run_layout.h"
#include "eval/evaluate.h"
#include "eval/sweep.h"
#include "eval/systems.h"
#include "model/attack/dae.h"
#include "model/release/release.h"
#include "stages/recipes/stage1.h"

namespace daei::cli {
namespace {

int run_dae_only(Context& ctx) {
  if (!ctx.comm->is_root()) return kExitOk;  // small: rank 0 alone
  EvalContext ec(ctx.release());  // the release the DAE table opens the training rows at (issue 64)
  const RunLayout layout(ctx.run_dir);
  ec.dae1 = std::make_shared<Dae>(Dae::load(layout.final_dae("stage1")));
  ec.dae_sigma.assumed = ctx.config.real("stage1.sigma.assumed");
  if (layout.stage_complete("stage3")) ec.dae3 = std::make_shared<Dae>(Dae::load(layout.final_dae("stage3")));
  auto t = dae_tables(ctx.config, ec, ctx.run_dir);
  nlohmann::json res{{"embedder", ctx.config.str("embedder.kind") == "glove" ? "glove-100d" : ctx.config.str("embedder.kind")},
                     {"sigma", (*ec.dae1)->sigma0()},
                     {"command", ctx.command_line},
                     {"dae", t.json_block}};
  const std::string path = layout.eval_file("dae.json");
  make_dirs(layout.eval_dir());
  write_file_atomic(path, res.dump(2) + "\n");
  std::cout << t.markdown;
  LOG_INFO("[eval] DAE table written to {}", path);
  return kExitOk;
}

}  // namespace

void validate_command(Context& ctx, const EvalCommand& cmd) {
  // Every score and clean row of an evaluation reads the defender's clean model: a remote release needs one named.
  require_reference_embedder(ctx.config);
  if (cmd.dae_only) {
    DAEI_CHECK(RunLayout(ctx.run_dir).stage_complete("stage1"), "eval --dae-only: no complete DAE at {} (run `daei "
               "train --stage 1` first)", RunLayout(ctx.run_dir).final_dae("stage1"));
    return;
  }
  const std::string tok = RunLayout(ctx.run_dir).tokenizer_for(ctx.config.str("inverter.tokenizer"));
  DAEI_CHECK(file_exists(tok), "eval: no tokenizer at {} (train stage 2 first)", tok);
  for (const auto& f : cmd.split_files) DAEI_CHECK(file_exists(f), "eval: --split {}: no such file", f);
}

int run_command(Context& ctx, const EvalCommand& cmd) {
  torch::set_num_threads(static_cast<int>(ctx.config.integer("train.threads")));
  if (cmd.dae_only) return run_dae_only(ctx);
  std::vector<double> sigmas;
  if (!cmd.sigmas.empty()) {
    std::stringstream ss(cmd.sigmas);
    for (std::string item; std::getline(ss, item, ',');) {
      char* end = nullptr;
      const double v = std::strtod(item.c_str(), &end);
      if (item.empty() || *end != '\0' || !(v > 0))
        throw UsageError(fmt::format("eval --sigma: '{}' is not a positive number (expected e.g. 0.02,0.04)", item));
      sigmas.push_back(v);
    }
  }
  int rc = kExitOk;
  if (sigmas.empty()) {
    rc = run_eval(ctx.config, *ctx.comm, ctx.run_dir, ctx.release(), cmd.split_files, ctx.command_line);
    if (ctx.comm->is_root() && rc == kExitOk) std::cout << read_file(RunLayout(ctx.run_dir).eval_file("results.md"));
    if (!ctx.config.flag("eval.sweep")) return rc;
    sigmas = ctx.config.reals("eval.sweep_sigmas");
  }
  // Every rank: the sweep's texts are split over the ranks, rank 0 scores them and writes the files.
  run_sigma_sweep(ctx.config, make_eval_context(ctx.config, ctx.run_dir, ctx.release(), ctx.comm.get()), ctx.run_dir, sigmas,
                  ctx.command_line);
  if (ctx.comm->is_root()) std::cout << read_file(RunLayout(ctx.run_dir).eval_file("sigma_sweep.md"));
  return rc;
}

DAEI_SUBCOMMAND(SubcommandSpec{{"eval"},
                               "the leakage table over every trained system (results.json / .md, samples.md); "
                               "--dae-only: the DAE table",
                               bind_options<EvalCommand>(add_flags, run_command, validate_command)});

}  // namespace daei::cli
