// daei hypotheses: stage-4 data — the stage-3 inverter's greedy hypotheses of the training texts, each re-queried
// through the noisy embedder, into cache/hyp-train (resumable, MPI-parallel like any cache).
#include <torch/torch.h>

#include <CLI/CLI.hpp>

#include "cli/app.h"
#include "core/error.h"
#include "core/log.h"
#include "model/embedder.h"
#include "stages/data_source.h"
#include "stages/hypotheses.h"
#include "stages/stage1.h"
#include "stages/stage2.h"
#include "stages/trainer.h"

namespace daei::cli {
namespace {

void validate(Context& ctx) {
  DAEI_CHECK(Trainer::final_ready(ctx.run_dir + "/stage3"),
             "hypotheses: {}/stage3/final is missing or incomplete (run `daei train --stage 3`)", ctx.run_dir);
}

int run(Context& ctx) {
  torch::set_num_threads(static_cast<int>(ctx.config.integer("train.threads")));
  const std::string s3 = ctx.run_dir + "/stage3";
  auto train = open_noisy_split(ctx.config, ctx.run_dir, "train");
  auto tok = run_tokenizer(ctx.config, *ctx.comm, ctx.run_dir, *train);
  double sigma0 = 0;
  Dae dae = load_dae(final_dae_dir(s3), &sigma0);
  auto inv = InverterImpl::load(Trainer::final_dir(s3) + "/inverter");
  auto opt = HypothesisCacheOptions::from_config(ctx.config, ctx.run_dir);
  opt.dae_sigma = sigma0;
  auto emb = make_run_embedder(ctx.config, ctx.run_dir);
  auto r = build_hypothesis_cache(opt, *inv, *dae, *tok, *emb, *ctx.comm);
  if (ctx.comm->is_root() && !r.already_complete)
    LOG_INFO("[hyps] {} hypotheses in {} shards ({:.0f} s)", r.rows, r.shards, r.seconds);
  return kExitOk;
}

DAEI_SUBCOMMAND(SubcommandSpec{{"hypotheses"},
                               "stage-4 data: the stage-3 inverter's hypotheses of the training texts, re-queried "
                               "through the noisy embedder into cache/hyp-train (resumable)",
                               [](CLI::App&) {}, run, true, false, validate});

}  // namespace
}  // namespace daei::cli
