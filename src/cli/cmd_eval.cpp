// daei eval --dae-only: the DAE table on val and test (eval/results.json `dae` block, printed).
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "stages/dae_table.h"
#include "stages/data_source.h"
#include "stages/stage1.h"
#include "stages/trainer.h"

namespace daei::cli {
namespace {

bool g_dae_only = false;
std::string g_dae_dir;

int run_dae_table(Context& ctx) {
  const std::string dir = g_dae_dir.empty() ? Trainer::final_dir(ctx.run_dir + "/stage1") : g_dae_dir;
  DAEI_CHECK(Trainer::is_complete(dir), "eval: no complete DAE at {} (run `daei train --stage 1` first)", dir);
  if (!ctx.comm->is_root()) return kExitOk;  // small: rank 0 alone
  double sigma0 = 0;
  Dae dae = load_dae(dir, &sigma0);
  at::Tensor mean, cov;
  row_moments(*open_noisy_split(ctx.config, ctx.run_dir, "train"), ctx.config.integer("dae.table_wiener_rows"), mean, cov);
  const auto wiener = wiener_from_noisy(mean, cov, sigma0);
  std::map<std::string, DaeRow> rows;
  for (const std::string split : {"val", "test"}) {
    auto s = open_eval_split(ctx.config, ctx.run_dir, split);
    DAEI_CHECK(std::abs(s.sigma - sigma0) <= 1e-9 * sigma0, "eval: {} was cached at σ {} but the DAE was trained at {}",
               split, s.sigma, sigma0);
    rows[split] = dae_row(dae, sigma0, wiener, s.clean, s.noisy);
  }
  const std::string path = ctx.run_dir + "/eval/results.json";
  nlohmann::json res = file_exists(path) ? nlohmann::json::parse(read_file(path)) : nlohmann::json::object();
  if (!res.contains("sigma")) res["sigma"] = sigma0;
  for (const auto& [split, r] : rows) res["dae"][split] = to_json(r);
  write_file_atomic(path, res.dump(2) + "\n");
  std::cout << format_table(rows, sigma0);
  LOG_INFO("[eval] DAE table written to {}", path);
  return kExitOk;
}

int run(Context& ctx) {
  if (!g_dae_only) throw UsageError("eval: only --dae-only is available in this build");
  torch::set_num_threads(static_cast<int>(ctx.config.integer("train.threads")));
  return run_dae_table(ctx);
}

DAEI_SUBCOMMAND(SubcommandSpec{{"eval"},
                               "evaluation tables; --dae-only: MSE/cosine to clean of noisy, DAE, Wiener filters",
                               [](CLI::App& app) {
                                 app.add_flag("--dae-only", g_dae_only, "only the DAE table");
                                 app.add_option("--dae", g_dae_dir, "DAE folder (default runs/NAME/stage1/final)");
                               },
                               run});

}  // namespace
}  // namespace daei::cli
