// The release a run attacks, with the σ its noise has, resolved once per command and passed down to every step that
// queries it or opens its noisy rows (caches, stages, evaluation), instead of each step re-deriving σ.
//
// The σ a run's attack assumes. Local noise: embedder.sigma. Remote noise (a service: embedder.kind http, or
// noise_source remote): the attacker does not know σ, so `cache build` estimates σ̂ once per run on the calibration
// texts (estimate.texts × estimate.repeats queries, eq. 3) into the run's estimate file (RunLayout::sigma_estimate),
// and every cache, stage and evaluation of the run uses σ̂; embedder.sigma is then only the declared value, logged
// beside σ̂. The model layer knows no run folder: callers pass the estimate file's path.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/config.h"
#include "model/release/embedder.h"

namespace daei {

class Release {
 public:
  // embedder.sigma, or σ̂ from the estimate file (an error naming the file and the fix when it is missing).
  static Release of_run(const Config& cfg, const std::string& estimate_file);
  // A release at a σ already known (tests, a split noised elsewhere).
  Release(const Config& cfg, double sigma) : cfg_(cfg), sigma_(sigma) {}

  double sigma() const { return sigma_; }
  // A new query handle at sigma(): each has its own noise stream, as a separately opened connection to the service
  // would (steps that query the release each open one, so sharing one would change what they draw).
  std::shared_ptr<NoisyEmbedder> embedder() const { return make_embedder(cfg_, sigma_); }

 private:
  Config cfg_;
  double sigma_;
};

// σ̂ of emb from the first estimate.texts calibration texts, `repeats` queries each (estimate-sigma, cache build).
SigmaEstimate estimate_release_sigma(const Config& cfg, const NoisyEmbedder& emb, int64_t repeats);
// Estimates σ̂ through the configured embedder and writes sigma_estimate.json atomically (one process).
SigmaEstimate write_sigma_estimate(const Config& cfg, const std::string& estimate_file);

}  // namespace daei
