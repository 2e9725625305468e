// daei zsinvert --input FILE [--output FILE] [--shield none|dae]: texts recovered from noisy embeddings by
// adversarial decoding (ZSInvert, issue 23; src/eval/zsinvert.h): the run's lm stage proposes tokens, the configured
// black box's cosine ranks them; no inverter. --shield dae scores through the stage-1 DAE (our variant).
// Input as `daei invert`: JSON lines {"embedding": [...]} or .npy [n, d]. Output: JSON lines {"text", "system",
// "cos" (the attacker's own score), "queries"}.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/embedding_input.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "data/run_layout.h"
#include "eval/systems.h"
#include "eval/zsinvert.h"
#include "model/attack/dae.h"
#include "model/release/release.h"
#include "stages/recipes/lm.h"
#include "stages/recipes/shared_options.h"
#include "stages/recipes/stage1.h"

namespace daei::cli {
namespace {

struct ZsinvertCommand {
  EmbeddingFiles files;
  std::string shield = "none";
};

void validate(Context& ctx, const ZsinvertCommand& cmd) {
  DAEI_CHECK(file_exists(cmd.files.input), "zsinvert: {}: no such file", cmd.files.input);
  if (cmd.shield != "none" && cmd.shield != "dae")
    throw UsageError(fmt::format("zsinvert: --shield must be none or dae, got '{}'", cmd.shield));
  const RunLayout layout(ctx.run_dir);
  DAEI_CHECK(layout.stage_complete("lm"),
             "zsinvert: no {}: train the generator first (`daei train --stage lm`)", layout.stage_final("lm"));
  if (cmd.shield == "dae")
    DAEI_CHECK(layout.stage_complete("stage1"), "zsinvert: --shield dae needs {}",
               layout.stage_final("stage1"));
}

int run(Context& ctx, const ZsinvertCommand& cmd) {
  if (!ctx.comm->is_root()) return kExitOk;
  const Config& cfg = ctx.config;
  torch::set_num_threads(static_cast<int>(cfg.integer("train.threads")));
  const at::Tensor y = read_embeddings(cmd.files.input, "zsinvert");
  const RunLayout layout(ctx.run_dir);
  const std::string tok_path = layout.tokenizer_for(cfg.str("inverter.tokenizer"));
  DAEI_CHECK(file_exists(tok_path), "zsinvert: no tokenizer at {}", tok_path);
  auto tok = std::make_shared<SpmTokenizer>(tok_path);
  auto lm = T5ModelImpl::from_pretrained(layout.final_module("lm", "lm"));
  auto embedder = ctx.release().embedder();
  DAEI_CHECK(y.size(1) == embedder->dim(), "zsinvert: {}: embeddings have dimension {}, the black box gives {}",
             cmd.files.input, y.size(1), embedder->dim());
  std::shared_ptr<Dae> dae;
  if (cmd.shield == "dae") dae = std::make_shared<Dae>(Dae::load(layout.final_dae("stage1")));
  QueryFn query = [embedder](const std::vector<std::string>& t, const std::vector<std::string>& k) {
    return embedder->embed(t, k);
  };
  DenoiseFn shield = [dae](const at::Tensor& e) { return dae ? denoise(*dae, e, (*dae)->sigma0()) : e; };
  std::vector<std::string> ids;
  for (int64_t i = 0; i < y.size(0); ++i) ids.push_back(fmt::format("zsinvert/{}", i));
  const std::string system = dae ? "zsinvert-dae" : "zsinvert";
  auto r = run_zsinvert(y, ids, query, shield, t5_generator(lm, tok, InverterOptions::from_config(cfg).max_length_eval),
                        zsinvert_options(cfg));
  std::string out;
  for (size_t i = 0; i < r.best_text.size(); ++i)
    out += nlohmann::json{{"text", r.best_text[i]}, {"system", system}, {"cos", r.best_cos[i]},
                          {"queries", r.queries_per_text[i]}}.dump() + "\n";
  write_recovered("zsinvert", cmd.files, out, r.best_text.size(), system);
  return kExitOk;
}

DAEI_SUBCOMMAND(SubcommandSpec{{"zsinvert"},
                               "texts recovered from noisy embeddings (JSON lines {\"embedding\": [...]} or .npy) by "
                               "adversarial decoding: the run's lm stage proposes, the black box's cosine ranks; no "
                               "inverter",
                               bind_options<ZsinvertCommand>(
                                   [](CLI::App& app, ZsinvertCommand& o) {
                                     add_embedding_files(app, o.files);
                                     app.add_option("--shield", o.shield,
                                                    "none: cos(f̃(x), y); dae: cos(DAE₁(f̃(x)), DAE₁(y)), our variant");
                                   },
                                   run, validate)});

}  // namespace
}  // namespace daei::cli
