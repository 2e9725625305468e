// daei invert --input FILE [--output FILE]: texts recovered from noisy embeddings with the run's trained attack —
// the daei system (stage 4 corrector, querying the configured black box) when trained, else the stage-3 or stage-2
// inverter behind its DAE. Input: JSON lines {"embedding": [...]} or .npy (float32/float64, [n, d]).
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
#include "eval/systems.h"

namespace daei::cli {
namespace {

void validate(Context&, const EmbeddingFiles& files) {
  DAEI_CHECK(file_exists(files.input), "invert: {}: no such file", files.input);
}

int run(Context& ctx, const EmbeddingFiles& files) {
  if (!ctx.comm->is_root()) return kExitOk;
  torch::set_num_threads(static_cast<int>(ctx.config.integer("train.threads")));
  at::Tensor y = read_embeddings(files.input, "invert");
  EvalContext ec = make_eval_context(ctx.config, ctx.run_dir);
  auto systems = available_systems(ec);
  const SystemSpec* best = nullptr;
  for (const auto& s : systems)
    if (!s.reference && s.name.rfind("noisy-", 0) != 0 && s.name.rfind("zsinvert", 0) != 0)
      best = &s;  // the last of the DAE chain is the strongest
  DAEI_CHECK(best, "invert: no trained attack in {} (train stage 2 first)", ctx.run_dir);
  const int64_t d = ec.stage2_inv ? ec.stage2_inv->cfg.dim : ec.stage3_inv->cfg.dim;
  DAEI_CHECK(y.size(1) == d, "invert: {}: embeddings have dimension {}, the trained attack expects {}", files.input,
             y.size(1), d);
  EvalSplit sp;
  sp.name = "invert";
  sp.noisy = y;
  sp.clean = y;
  sp.sigma = ec.sigma0;
  sp.texts.assign(static_cast<size_t>(y.size(0)), "");
  auto run = best->recover(sp);
  std::string out;
  for (size_t i = 0; i < run.texts.size(); ++i)
    out += nlohmann::json{{"text", run.texts[i]}, {"system", best->name},
                          {"queries", run.queries.empty() ? 0.0 : run.queries[i]}}.dump() + "\n";
  write_recovered("invert", files, out, run.texts.size(), best->name);
  return kExitOk;
}

DAEI_SUBCOMMAND(SubcommandSpec{{"invert"},
                               "texts recovered from noisy embeddings (JSON lines {\"embedding\": [...]} or .npy) "
                               "with the run's trained attack",
                               bind_options<EmbeddingFiles>(add_embedding_files, run, validate)});

}  // namespace
}  // namespace daei::cli
