// daei pipeline: every step of the attack in order, each skipped when complete and resumed when partial:
//   corpus → caches (train; val/test/OOD with offline-eval clean rows; the clean training cache only for the
//   references) → stage 1 → stage 2 → baselines → stage 3 → hypotheses → stage 4 → (zsinvert.enabled: the lm
//   stage, zsinvert's generator) → eval.
// Each step is the same subcommand a user would run (its options struct, built afresh for the step, and the same
// validate and run functions), so the pipeline adds no second code path and no flag carries over between steps.
// A stop request (exit 75) ends the pipeline with 75: run it again to resume.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <variant>

#include "cli/app.h"
#include "cli/commands.h"
#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/progress.h"
#include "data/run_layout.h"
#include "dist/communicator.h"
#include "stages/recipes/catalogue.h"
#include "stages/loop/trainer.h"

namespace daei::cli {
namespace {

using StepCommand = std::variant<CorpusBuildCommand, CacheBuildCommand, TrainCommand, HypothesesCommand, EvalCommand>;

struct Step {
  std::string name;
  StepCommand command;
  std::string inputs, outputs;       // for --dry-run
  std::function<bool()> complete;
  std::function<bool()> started;     // partial work exists (resumed)
  // Run even when complete: the command checks that its finished output comes from this run's inputs and returns
  // at once if so. The hypotheses are decoded by the run's own inverter, and a cache/ linked from another run (other
  // training seed) holds complete hypotheses of another inverter: a skip trained the correctors on those.
  bool recheck_when_complete = false;
};

int run_step(const Step& st, Context& ctx) {
  return std::visit(
      [&ctx](const auto& command) {
        validate_command(ctx, command);
        return run_command(ctx, command);
      },
      st.command);
}

// "train --stage 1 --resume": the command a user would type for the step.
std::string command_line(const Step& st) {
  return std::visit([](const auto& c) { return std::string(c.kName) + " " + command_args(c); }, st.command);
}

TrainCommand resume_stage(const std::string& stage) {
  TrainCommand c;
  c.stage = stage;
  c.resume = true;
  return c;
}

bool has_checkpoint(const std::string& stage_dir) { return !Trainer::latest_checkpoint(stage_dir).empty(); }

std::vector<Step> plan(const Context& ctx) {
  const Config& c = ctx.config;
  const RunLayout layout(ctx.run_dir);
  auto exists = [](std::string p) { return [p] { return file_exists(p); }; };
  auto stage = [&](const std::string& name, const std::string& flag, const std::string& folder, const std::string& in) {
    const std::string dir = layout.stage(folder);
    return Step{name, resume_stage(flag), in, layout.stage_final(folder) + "/",
                [layout, folder] { return layout.stage_complete(folder); }, [dir] { return has_checkpoint(dir); }};
  };
  std::vector<Step> s;
  s.push_back({"corpus", CorpusBuildCommand{}, "corpus.sources", layout.corpus_dir() + "/*.jsonl", exists(layout.corpus_stats()),
               [] { return false; }});
  auto cache = [&](const std::string& split, bool clean) {
    const std::string dir = layout.cache(split);
    return Step{"cache " + split + (clean ? " (+ offline-eval clean)" : ""), CacheBuildCommand{split, clean},
                layout.corpus(split), dir + "/",
                [layout, split, clean] { return layout.cache_complete(split) && (!clean || layout.clean_cache_complete(split)); },
                [dir] { return file_exists(dir); }};
  };
  const bool reference = c.flag("reference.enabled");
  if (c.flag("reference.corrector") && !reference)
    throw UsageError("reference.corrector: true needs reference.enabled: true (the clean corrector corrects the clean "
                     "inverter, a reference outside the threat model)");
  s.push_back(cache("train", reference));
  s.push_back(cache("val", true));
  s.push_back(cache("test", true));
  for (const auto& o : c.strings("corpus.ood")) s.push_back(cache("ood-" + o, true));
  // The trained stages in the catalogue's order (src/stages/recipes/catalogue.h), each where its flags ask for it; a
  // corrector after the hypotheses it trains on.
  for (const StageSpec& st : stage_catalogue()) {
    if (!runs_in_pipeline(st, c)) continue;
    if (const CorrectorChain* ch = st.chain) {
      const std::string train = layout.cache(ch->hyp_split), val = layout.cache(ch->hyp_val_split());
      const std::string hyp_split = ch->hyp_split, hyp_val = ch->hyp_val_split();
      const std::string from = ch->inverter_stage + "/final" +
                               (ch->dae_stage.empty() ? " (no DAE)" : ", " + ch->dae_stage + "/final/dae");
      s.push_back({"hypotheses for " + ch->system, HypothesesCommand{ch->stage}, from + ", cache/train, cache/val",
                   train + "/, " + val + "/",
                   [=] {
                     return layout.cache_complete(hyp_split) &&
                            (!layout.cache_complete("val") || layout.cache_complete(hyp_val));
                   },
                   [train] { return file_exists(train); }, true});
    }
    s.push_back(stage(st.title, st.name, st.folder, st.inputs));
  }
  s.push_back({"eval", EvalCommand{}, "every final/, cache/{test,ood-*}", layout.eval_file("results.{json,md}") + ", samples.md",
               exists(layout.eval_file("results.json")), [] { return false; }});
  return s;
}

void print_dry_run(const Context& ctx, const std::vector<Step>& steps) {
  const int64_t W = ctx.comm->size();
  std::cout << fmt::format("daei pipeline --dry-run: run directory {}, {} rank{}\n", ctx.run_dir, W, W == 1 ? "" : "s");
  int i = 0;
  for (const auto& st : steps) {
    std::cout << fmt::format("{:2}. {:<42} daei {}\n      in:  {}\n      out: {}\n      now: {}\n", ++i, st.name,
                             command_line(st), st.inputs, st.outputs,
                             st.complete() ? (st.recheck_when_complete ? "complete (checked against this run's models)"
                                                                     : "complete (skipped)")
                             : st.started() ? "partial (resumed)"
                                            : "to do");
  }
  std::cout << "\nGlobal batch per optimizer step (= ranks × per-rank micro-batch × grad_accum):\n";
  std::vector<std::string> keys{"stage1", "stage2", "stage3", "stage4"};
  if (ctx.config.flag("zsinvert.enabled")) keys.push_back("lm");
  if (ctx.config.flag("pretrain.enabled")) keys.push_back("pretrain");
  if (ctx.config.flag("bow.enabled")) keys.push_back("bow");  // and the guided inverters' fold models
  for (const std::string& k : keys) {
    const int64_t B = ctx.config.integer(k + ".batch_size"), A = ctx.config.integer(k + ".grad_accum");
    const int64_t steps = ctx.config.integer(k + ".steps");
    const bool ok = B % (W * A) == 0;
    std::cout << fmt::format("  {}: {} = {} × {} × {}{}; {} steps = {} examples\n", k, B, W, ok ? B / (W * A) : 0, A,
                             ok ? "" : "  ← NOT divisible: change the batch size or the number of ranks", steps,
                             steps * B);
  }
}

struct PipelineCommand {
  bool dry_run = false;
};

int run(Context& ctx, const PipelineCommand& cmd) {
  torch::set_num_threads(static_cast<int>(ctx.config.integer("train.threads")));
  auto steps = plan(ctx);
  if (!cmd.dry_run) ctx.commit_config();
  if (cmd.dry_run) {
    if (ctx.comm->is_root()) print_dry_run(ctx, steps);
    return kExitOk;
  }
  std::vector<std::string> summary;
  const auto t_all = std::chrono::steady_clock::now();
  for (const auto& st : steps) {
    // Rank 0 decides and every rank follows: each rank reading the files itself raced with rank 0 writing them (a
    // rank that saw the corpus step's stats.json appear skipped the step, and the ranks deadlocked in different
    // collectives: a barrier and the cache plan's broadcast).
    const bool complete = ctx.comm->allreduce(ctx.comm->is_root() && st.complete() ? 1.0 : 0.0, ReduceOp::Max) > 0;
    if (complete && !st.recheck_when_complete) {
      summary.push_back(fmt::format("{:<42} skipped (complete)", st.name));
      LOG_INFO("[pipeline] {}: complete, skipped", st.name);
      continue;
    }
    // A complete step that rechecks runs its command, which returns at once when its output is this run's own and
    // refuses in one line when it is another build's.
    const bool resumed =
        !complete && ctx.comm->allreduce(ctx.comm->is_root() && st.started() ? 1.0 : 0.0, ReduceOp::Max) > 0;
    LOG_INFO("[pipeline] {}: {}", st.name,
             complete ? "complete; checking that it comes from this run's models" : resumed ? "resuming" : "starting");
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = run_step(st, ctx);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rc == kExitStopped) {
      LOG_INFO("[pipeline] {}: stopped on request after a checkpoint; run the pipeline again to resume", st.name);
      return rc;
    }
    if (rc != kExitOk) return rc;
    summary.push_back(complete ? fmt::format("{:<42} skipped (complete, checked)", st.name)
                               : fmt::format("{:<42} {} in {}", st.name, resumed ? "resumed, done" : "done",
                                             Progress::format_duration(s)));
    ctx.comm->barrier();
  }
  if (ctx.comm->is_root()) {
    std::cout << "\npipeline summary (" << ctx.run_dir << "):\n";
    for (const auto& l : summary) std::cout << "  " << l << "\n";
    std::cout << fmt::format("  total {}\n",
                             Progress::format_duration(
                                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count()));
  }
  return kExitOk;
}

SubcommandSpec spec() {
  SubcommandSpec s{{"pipeline"},
                   "every step in order (corpus, caches, stages 1–4, baselines, eval), skipping what is complete and "
                   "resuming what is partial; --dry-run prints the plan",
                   bind_options<PipelineCommand>(
                       [](CLI::App& app, PipelineCommand& o) {
                         app.add_flag("--dry-run", o.dry_run,
                                      "print the steps, their inputs and outputs and the batch arithmetic");
                       },
                       run)};
  s.commits_config = true;  // run() saves config.yaml, except on --dry-run (a plan changes nothing)
  return s;
}

DAEI_SUBCOMMAND(spec());

}  // namespace
}  // namespace daei::cli
