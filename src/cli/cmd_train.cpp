// daei train --stage K [--resume]: one training stage (stages 2–4 add their entry to `stages` below).
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <map>

#include "cli/app.h"
#include "core/error.h"
#include "core/log.h"
#include "stages/data_source.h"
#include "stages/stage1.h"
#include "stages/trainer.h"

namespace daei::cli {
namespace {

std::string g_stage;
bool g_resume = false;

int train_stage1(Context& ctx, const std::string& stage_dir) {
  auto train = open_noisy_split(ctx.config, ctx.run_dir, "train");
  std::shared_ptr<const NoisyDataset> val;
  if (ctx.config.integer("stage1.eval_every") > 0) val = open_noisy_split(ctx.config, ctx.run_dir, "val");
  Stage1 s(ctx.config, *ctx.comm, stage_dir, train, val, g_resume);
  return s.run();
}

int run(Context& ctx) {
  const std::map<std::string, std::function<int(Context&, const std::string&)>> stages{{"1", train_stage1}};
  auto it = stages.find(g_stage);
  if (it == stages.end()) throw UsageError(fmt::format("train: --stage {} is not available in this build", g_stage));
  torch::set_num_threads(static_cast<int>(ctx.config.integer("train.threads")));
  const std::string stage_dir = ctx.run_dir + "/stage" + g_stage;
  if (Trainer::is_complete(Trainer::final_dir(stage_dir))) {
    LOG_INFO("[stage{}] {} is complete; nothing to do (remove it to train again)", g_stage,
             Trainer::final_dir(stage_dir));
    return kExitOk;
  }
  return it->second(ctx, stage_dir);
}

DAEI_SUBCOMMAND(SubcommandSpec{{"train"},
                               "train one stage (1: SURE-trained DAE); --resume continues from the newest checkpoint",
                               [](CLI::App& app) {
                                 app.add_option("--stage", g_stage, "stage to train: 1")->required();
                                 app.add_flag("--resume", g_resume, "continue from the newest complete checkpoint");
                               },
                               run});

}  // namespace
}  // namespace daei::cli
