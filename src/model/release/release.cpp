#include "model/release/release.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"

namespace daei {

SigmaEstimate estimate_release_sigma(const Config& cfg, const NoisyEmbedder& emb, int64_t repeats) {
  const int64_t m = cfg.integer("estimate.texts");
  const auto& all = calibration_texts();
  DAEI_CHECK(m >= 1 && m <= int64_t(all.size()), "estimate.texts must be in 1..{}, got {}", all.size(), m);
  const std::vector<std::string> texts(all.begin(), all.begin() + m);
  return estimate_sigma([&](const std::vector<std::string>& t) { return emb.embed(t); }, texts, repeats);
}

SigmaEstimate write_sigma_estimate(const Config& cfg, const std::string& estimate_file) {
  auto emb = make_embedder(cfg);
  const int64_t m = cfg.integer("estimate.texts"), repeats = cfg.integer("estimate.repeats");
  LOG_INFO("[cache] remote noise: estimating sigma from {} queries ({} calibration texts x {} repeats)", m * repeats,
           m, repeats);
  const auto est = estimate_release_sigma(cfg, *emb, repeats);
  DAEI_CHECK(est.sigma > 0 && std::isfinite(est.sigma),
             "{}: repeated queries of the same text returned {} spread (sigma_hat {}): the service adds no fresh "
             "noise per query, so there is no sigma to estimate (embedder.noise_source: local if it is not noisy)",
             emb->inner().id(), est.sigma == 0 ? "no" : "a non-finite", est.sigma);
  nlohmann::json j{{"sigma_hat", est.sigma}, {"rel_se", est.rel_se},     {"queries", est.queries},
                   {"texts", est.texts},     {"repeats", est.repeats},   {"dim", est.dim},
                   {"embedder", emb->id()},  {"declared_sigma", cfg.real("embedder.sigma")}};
  make_dirs(std::filesystem::path(estimate_file).parent_path().string());
  write_file_atomic(estimate_file, j.dump(2) + "\n");
  LOG_INFO("[cache] sigma_hat {:.6f} (rel. s.e. {:.2f} %; embedder.sigma declares {}): every step of this run uses "
           "sigma_hat ({})", est.sigma, 100 * est.rel_se, cfg.real("embedder.sigma"), estimate_file);
  return est;
}

Release Release::of_run(const Config& cfg, const std::string& estimate_file) {
  if (!noise_is_remote(cfg)) return Release(cfg, cfg.real("embedder.sigma"));
  const std::string& p = estimate_file;
  DAEI_CHECK(file_exists(p), "{}: missing; the release adds its noise remotely, so its sigma is estimated by "
             "`daei cache build` (run it first)", p);
  auto j = nlohmann::json::parse(read_file(p), nullptr, false);
  DAEI_CHECK(!j.is_discarded() && j.is_object() && j.contains("sigma_hat") && j["sigma_hat"].is_number() &&
                 j["sigma_hat"].get<double>() > 0 && std::isfinite(j["sigma_hat"].get<double>()),
             "{}: not a sigma estimate (expected a JSON object with a positive \"sigma_hat\"); delete it and run "
             "`daei cache build` again", p);
  return Release(cfg, j["sigma_hat"].get<double>());
}

}  // namespace daei
