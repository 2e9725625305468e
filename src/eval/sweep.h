// The noise sweep (`daei eval --sigma 0.02,0.03,...`): for each σ, fresh noisy test embeddings y = x + σ·n (noise
// keyed by σ and row, never the cache's), the σ-conditioned DAEs called at that σ (one model trained over the
// log-uniform σ range: no retraining per σ), and the attack's BLEU / token F1 / cosine beside the defender's utility
// at the same σ: cosine of noisy to clean, and recall@1/@10 when the noisy test embeddings query the clean test set.
// Writes eval/sigma_sweep.json, sigma_sweep.md and sigma_sweep.png (gnuplot). A collective over ctx.comm: the
// recoveries are split over the ranks (decode_texts), rank 0 scores them and writes the files.
#pragma once
#include <string>
#include <vector>

namespace daei {
class Config;
struct EvalContext;

void run_sigma_sweep(const Config& cfg, const EvalContext& ctx, const std::string& run_dir,
                     const std::vector<double>& sigmas, const std::string& command_line);
// The gnuplot script of sigma_sweep.png for a data file of rows "sigma cos recall1 recall10 bleu f1".
std::string sigma_sweep_gnuplot(const std::string& data_path, const std::string& png);
}  // namespace daei
