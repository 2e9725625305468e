// daei hypotheses [--for STAGE]: a corrector's data — its inverter's greedy hypotheses of the training texts, each
// re-queried through the noisy embedder, into cache/hyp-train* (resumable, MPI-parallel like any cache), and the
// same for the first train.heldout_rows val rows into cache/hyp-val* (the corrector's held-out CE).
//   --for 4                stage-3 inverter on DAE₃(y)   → cache/hyp-train, hyp-val            (daei)
//   --for dae-corrector    stage-2 inverter on DAE₁(y)   → cache/hyp-train-dae, hyp-val-dae    (dae-corrected)
//   --for dae-continued-corrector  stage2-continued on DAE₁(y) → cache/hyp-train-dae-continued, hyp-val-dae-continued
//                          (dae-corrected-continued: dae-corrected at daei's inverter steps; with stage3.control)
//   --for noisy-corrector  noisy inverter on y, no DAE  → cache/hyp-train-noisy, hyp-val-noisy (noisy-vec2text)
//   --for clean-corrector  clean inverter on e, embedded without noise → cache/hyp-train-clean, hyp-val-clean
//                          (reference.corrector: the corrected clean-to-* references, outside the threat model)
#include <torch/torch.h>

#include <CLI/CLI.hpp>

#include "cli/app.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "data/run_layout.h"
#include "eval/reference.h"
#include "model/attack/dae.h"
#include "model/release/release.h"
#include "stages/loop/data_source.h"
#include "stages/recipes/hypotheses.h"
#include "stages/recipes/stage1.h"
#include "stages/recipes/stage2.h"
#include "stages/recipes/stage4.h"

namespace daei::cli {
namespace {

const CorrectorChain& chain(const HypothesesCommand& cmd) {
  const CorrectorChain* c = find_corrector_chain(cmd.for_stage);
  if (!c)
    throw UsageError(
        fmt::format("hypotheses: --for {} is not one of: 4, dae-corrector, dae-continued-corrector, noisy-corrector, "
                    "clean-corrector",
                    cmd.for_stage));
  return *c;
}

}  // namespace

void validate_command(Context& ctx, const HypothesesCommand& cmd) {
  const auto& c = chain(cmd);
  if (c.reference) require_clean_corrector_reference(ctx.config, ctx.run_dir);
  for (const auto& need : {c.inverter_stage, c.dae_stage})
    DAEI_CHECK(need.empty() || RunLayout(ctx.run_dir).stage_complete(need),
               "hypotheses --for {}: {} is missing or incomplete (train it first)", c.stage,
               RunLayout(ctx.run_dir).stage_final(need));
}

int run_command(Context& ctx, const HypothesesCommand& cmd) {
  torch::set_num_threads(static_cast<int>(ctx.config.integer("train.threads")));
  const auto& c = chain(cmd);
  auto train = open_noisy_split(ctx.config, ctx.run_dir, "train", ctx.release());
  auto tok = run_tokenizer(ctx.config, *ctx.comm, ctx.run_dir, *train);
  Dae dae{nullptr};
  const RunLayout layout(ctx.run_dir);
  if (!c.dae_stage.empty()) dae = Dae::load(layout.final_dae(c.dae_stage));
  auto inv = InverterImpl::load(layout.final_inverter(c.inverter_stage));
  // The clean reference decodes the clean rows e and embeds its hypotheses without noise; the attack's chains decode
  // y (or DAE(y)) and query the release. The paper's protocol (protocol.clean_hypotheses) embeds the daei chain's
  // hypotheses clean as well: outside the threat model, and only that chain.
  const bool clean_hyps = c.reference || (c.system == "daei" && ctx.config.flag("protocol.clean_hypotheses"));
  if (clean_hyps && !c.reference)
    LOG_WARN("[hyps] protocol.clean_hypotheses: the daei chain's hypotheses are embedded without noise (the paper's "
             "code; outside the threat model)");
  auto emb = clean_hyps ? clean_hypothesis_embedder(ctx.config) : ctx.release().embedder();
  std::vector<std::pair<std::string, std::string>> builds{{"train", c.hyp_split}};
  if (c.reference ? layout.clean_cache_complete("val") : layout.cache_complete("val"))
    builds.emplace_back("val", c.hyp_val_split());
  for (const auto& [source, split] : builds) {
    auto opt = HypothesisCacheOptions::from_config(ctx.config, ctx.run_dir, source, split);
    opt.dae_sigma = dae ? dae->sigma0() : 0.0;
    if (c.reference) {
      opt.input_rows = clean_rows_reader(ctx.config, ctx.run_dir, source);
      opt.input_tag = "clean";
    }
    auto r = build_hypothesis_cache(opt, *inv, dae ? dae.get() : nullptr, *tok, *emb, *ctx.comm);
    if (ctx.comm->is_root() && !r.already_complete)
      LOG_INFO("[hyps] {}: {} hypotheses of {} by the {} inverter{} in {} shards ({:.0f} s)", split, r.rows, source,
               c.inverter_stage, c.dae_stage.empty() ? " (no DAE)" : " on DAE(y) of " + c.dae_stage, r.shards,
               r.seconds);
  }
  return kExitOk;
}

DAEI_SUBCOMMAND(SubcommandSpec{{"hypotheses"},
                               "a corrector's data: its inverter's hypotheses of the training texts (and of "
                               "train.heldout_rows val texts), re-queried through the noisy embedder into "
                               "cache/hyp-train* and cache/hyp-val* (resumable)",
                               bind_options<HypothesesCommand>(add_flags, run_command, validate_command)});

}  // namespace daei::cli
