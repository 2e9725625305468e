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
#include "model/embedder.h"
#include "stages/lm.h"
#include "stages/stage1.h"

namespace daei::cli {
namespace {

std::string g_input, g_output, g_shield = "none";

void validate(Context& ctx) {
  DAEI_CHECK(file_exists(g_input), "zsinvert: {}: no such file", g_input);
  if (g_shield != "none" && g_shield != "dae")
    throw UsageError(fmt::format("zsinvert: --shield must be none or dae, got '{}'", g_shield));
  const RunLayout layout(ctx.run_dir);
  DAEI_CHECK(layout.stage_complete("lm"),
             "zsinvert: no {}: train the generator first (`daei train --stage lm`)", layout.stage_final("lm"));
  if (g_shield == "dae")
    DAEI_CHECK(layout.stage_complete("stage1"), "zsinvert: --shield dae needs {}",
               layout.stage_final("stage1"));
}

int run(Context& ctx) {
  if (!ctx.comm->is_root()) return kExitOk;
  const Config& cfg = ctx.config;
  torch::set_num_threads(static_cast<int>(cfg.integer("train.threads")));
  const at::Tensor y = read_embeddings(g_input, "zsinvert");
  const RunLayout layout(ctx.run_dir);
  const std::string tok_path = layout.tokenizer_for(cfg.str("inverter.tokenizer"));
  DAEI_CHECK(file_exists(tok_path), "zsinvert: no tokenizer at {}", tok_path);
  auto tok = std::make_shared<SpmTokenizer>(tok_path);
  auto lm = T5ModelImpl::from_pretrained(layout.final_module("lm", "lm"));
  auto embedder = make_run_embedder(cfg, layout.sigma_estimate());
  DAEI_CHECK(y.size(1) == embedder->dim(), "zsinvert: {}: embeddings have dimension {}, the black box gives {}",
             g_input, y.size(1), embedder->dim());
  std::shared_ptr<Dae> dae;
  double sigma0 = 0;
  if (g_shield == "dae") dae = std::make_shared<Dae>(load_dae(layout.final_dae("stage1"), &sigma0));
  QueryFn query = [embedder](const std::vector<std::string>& t, const std::vector<std::string>& k) {
    return embedder->embed(t, k);
  };
  DenoiseFn shield = [dae, sigma0](const at::Tensor& e) { return dae ? denoise(*dae, e, sigma0) : e; };
  std::vector<std::string> ids;
  for (int64_t i = 0; i < y.size(0); ++i) ids.push_back(fmt::format("zsinvert/{}", i));
  const std::string system = dae ? "zsinvert-dae" : "zsinvert";
  auto r = run_zsinvert(y, ids, query, shield, t5_generator(lm, tok, cfg.integer("inverter.max_length_eval")),
                        zsinvert_options(cfg));
  std::string out;
  for (size_t i = 0; i < r.best_text.size(); ++i)
    out += nlohmann::json{{"text", r.best_text[i]}, {"system", system}, {"cos", r.best_cos[i]},
                          {"queries", r.queries_per_text[i]}}.dump() + "\n";
  if (g_output.empty()) std::cout << out;
  else write_file_atomic(g_output, out);
  LOG_INFO("[zsinvert] {} texts recovered with {}{}", r.best_text.size(), system,
           g_output.empty() ? "" : " into " + g_output);
  return kExitOk;
}

DAEI_SUBCOMMAND(SubcommandSpec{{"zsinvert"},
                               "texts recovered from noisy embeddings (JSON lines {\"embedding\": [...]} or .npy) by "
                               "adversarial decoding: the run's lm stage proposes, the black box's cosine ranks; no "
                               "inverter",
                               [](CLI::App& app) {
                                 app.add_option("--input", g_input, "embeddings: .jsonl or .npy [n, d]")->required();
                                 app.add_option("--output", g_output, "JSON lines of recovered texts (default stdout)");
                                 app.add_option("--shield", g_shield,
                                                "none: cos(f̃(x), y); dae: cos(DAE₁(f̃(x)), DAE₁(y)), our variant");
                               },
                               run, true, false, validate});

}  // namespace
}  // namespace daei::cli
