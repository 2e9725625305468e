#include "eval/sweep.h"

#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "build_info.h"
#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "data/cache.h"
#include "data/run_layout.h"
#include "dist/communicator.h"
#include "eval/clean_cache.h"
#include "eval/metrics.h"
#include "eval/release_report.h"
#include "eval/systems.h"
#include "model/release/embedder.h"

namespace daei {
namespace fs = std::filesystem;
using json = nlohmann::json;


// Every title and legend entry is drawn as written (noenhanced): in gnuplot's enhanced text '@' makes a phantom box
// ("recall@10" read "recall0"), '_' and '^' sub- and superscripts.
std::string sigma_sweep_gnuplot(const std::string& data_path, const std::string& png) {
  const std::string lp = " with linespoints lw 2 title ";
  return fmt::format(
      "set terminal png size 900,420\nset output '{png}'\nset multiplot layout 1,2\nset grid\n"
      "set xlabel 'sigma' noenhanced\nset key bottom left\nset title 'leakage (attack)' noenhanced\n"
      "plot '{dat}' using 1:5{lp}'BLEU' noenhanced, '' using 1:6{lp}'token F1' noenhanced, '' using 1:7{lp}'content F1' noenhanced\n"
      "set title 'utility (defender)' noenhanced\n"
      "plot '{dat}' using 1:2{lp}'cos(noisy, clean)' noenhanced, '' using 1:3{lp}'recall@1' noenhanced, "
      "'' using 1:4{lp}'recall@10' noenhanced\nunset multiplot\n",
      fmt::arg("png", png), fmt::arg("dat", data_path), fmt::arg("lp", lp));
}

void run_sigma_sweep(const Config& cfg, const EvalContext& ctx, const std::string& run_dir,
                     const std::vector<double>& sigmas, const std::string& command_line) {
  DAEI_CHECK(!sigmas.empty(), "eval --sigma: no σ given");
  for (double s : sigmas) DAEI_CHECK(s > 0 && std::isfinite(s), "eval --sigma: σ must be > 0, got {}", s);
  // The attack: the strongest trained system without correction rounds (joint-no-corrector, else dae-only).
  const bool joint = ctx.inverter("stage3") != nullptr;
  std::shared_ptr<InverterImpl> inv = joint ? ctx.inverter("stage3") : ctx.inverter("stage2");
  std::shared_ptr<Dae> dae = joint ? ctx.dae3 : ctx.dae1;
  const std::string attack = joint ? "joint-no-corrector" : "dae-only";
  DAEI_CHECK(inv && dae, "eval --sigma: no trained attack (stage 2 or 3) in {}", run_dir);
  const EvalSplit base = open_eval_split(run_dir, "test", cfg.integer("eval.max_texts"));
  const int64_t n = base.clean.size(0);
  const uint64_t seed = static_cast<uint64_t>(cfg.integer("embedder.noise_seed"));
  const int64_t d = base.clean.size(1);
  // Every rank: each σ's noisy rows (keyed noise: the same on every rank) and the attack's recoveries, the texts
  // split over the ranks by decode_texts.
  std::vector<EvalSplit> points;
  std::vector<std::vector<std::string>> recovered;
  for (double sigma : sigmas) {
    EvalSplit sp = base;
    sp.name = fmt::format("test@{}", sigma);
    sp.sigma = sigma;
    auto noise = torch::empty({n, d});
    for (int64_t i = 0; i < n; ++i)
      gaussian_noise(seed, fmt::format("sweep/{}/{}", sigma, i), noise[i].data_ptr<float>(), d);
    sp.noisy = base.clean + sigma * noise;
    recovered.push_back(decode_texts(ctx, *inv, denoise(*dae, sp.noisy, ctx.dae_sigma(sp)), sp.name));
    points.push_back(std::move(sp));
  }
  // Rank 0: the scores and the files.
  comm_of(ctx).run_on_root([&] {
    const auto refs = reference_texts(ctx, base.texts);
    json out{{"command", command_line}, {"revision", DAEI_GIT_REV}, {"n", n}, {"points", json::array()}};
    std::string md = fmt::format("# Noise sweep (test, n = {})\n\n`{}` · revision {}\n\n| σ | cos(noisy, clean) | "
                                 "recall@1 | recall@10 | attack | BLEU | token F1 | content F1 | cos(recovered, true) |\n"
                                 "|---|---|---|---|---|---|---|---|---|\n",
                                 n, command_line, DAEI_GIT_REV);
    const RunLayout layout(run_dir);
    const std::string data_path = layout.eval_file("sigma_sweep.dat");
    std::ofstream dat(data_path);
    dat << "# sigma cos_noisy recall1 recall10 bleu token_f1 content_f1\n";
    for (size_t k = 0; k < points.size(); ++k) {
      const EvalSplit& sp = points[k];
      const auto& texts = recovered[k];
      const double sigma = sp.sigma;
      const double cos_noisy =
          torch::cosine_similarity(sp.noisy.to(torch::kFloat64), sp.clean.to(torch::kFloat64), 1).mean().item<double>();
      const auto [r1, r10] = recall_at(sp.noisy, sp.clean);  // eval/release_report.h
      const auto per = metrics::score_all(texts, refs);
      auto rec = ctx.clean_embedder->embed(texts);
      const double cos_rec =
          torch::cosine_similarity(rec.to(torch::kFloat64), sp.clean.to(torch::kFloat64), 1).mean().item<double>();
      const double bleu = metrics::mean(per.bleu), f1 = metrics::mean(per.token_f1);
      const auto bci = metrics::bootstrap_ci(per.bleu, 1000, 1), fci = metrics::bootstrap_ci(per.token_f1, 1000, 1);
      const double cf1 = metrics::mean(per.content_f1);
      const auto cci = metrics::bootstrap_ci(per.content_f1, 1000, 1);
      out["points"].push_back({{"sigma", sigma}, {"cos_noisy_clean", cos_noisy}, {"recall_at_1", r1},
                               {"recall_at_10", r10}, {"attack", attack}, {"bleu", bleu}, {"bleu_ci", {bci.lo, bci.hi}},
                               {"token_f1", f1}, {"token_f1_ci", {fci.lo, fci.hi}}, {"content_f1", cf1},
                               {"content_f1_ci", {cci.lo, cci.hi}}, {"cos", cos_rec}});
      md += fmt::format("| {} | {:.3f} | {:.3f} | {:.3f} | {} | {:.3f} [{:.3f}, {:.3f}] | {:.3f} [{:.3f}, {:.3f}] | "
                        "{:.3f} [{:.3f}, {:.3f}] | {:.3f} |\n",
                        sigma, cos_noisy, r1, r10, attack, bleu, bci.lo, bci.hi, f1, fci.lo, fci.hi, cf1, cci.lo,
                        cci.hi, cos_rec);
      dat << sigma << " " << cos_noisy << " " << r1 << " " << r10 << " " << bleu << " " << f1 << " " << cf1 << "\n";
      LOG_INFO("[sweep] σ {}: cos {:.3f} recall@1 {:.3f} | {} BLEU {:.3f} F1 {:.3f} content F1 {:.3f}", sigma,
               cos_noisy, r1, attack, bleu, f1, cf1);
    }
    dat.close();
    md += "\nA defender reads the row where leakage (BLEU, token F1, content F1) falls below the threshold it accepts and pays the "
          "recall of that row. σ is the noise of the release; the DAE is called at that σ.\n";
    write_file_atomic(layout.eval_file("sigma_sweep.json"), out.dump(2) + "\n");
    write_file_atomic(layout.eval_file("sigma_sweep.md"), md);
    const std::string gp = layout.eval_file("sigma_sweep.gp"), png = layout.eval_file("sigma_sweep.png");
    {
      std::ofstream g(gp);
      g << sigma_sweep_gnuplot(data_path, png);
    }
    if (std::system(("gnuplot '" + gp + "' >/dev/null 2>&1").c_str()) != 0)
      LOG_WARN("[sweep] gnuplot failed or missing: {} not drawn (the numbers are in sigma_sweep.json)", png);
    fs::remove(gp);
    LOG_INFO("[sweep] wrote {}", layout.eval_file("sigma_sweep.{json,md,png}"));
  });
}

}  // namespace daei
