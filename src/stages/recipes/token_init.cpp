#include "stages/recipes/token_init.h"

#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "model/release/embedder.h"
#include "model/net/t5.h"
#include "model/text/tokenizer_spm.h"

namespace daei {

std::string TokenInitReport::describe() const {
  if (gave_up)
    return fmt::format("token embeddings: none of the first {} pieces rose above the noise in {} black-box queries, so "
                       "the other {} were not queried and every row stays random (inverter.token_init does nothing on "
                       "this release)",
                       queried, queries, pieces - queried);
  return fmt::format("token embeddings of {} of {} pieces from {} black-box queries (inverter.token_init)", initialised,
                     pieces, queries);
}

TokenInitReport init_token_embeddings(T5ModelImpl& t5, const SpmTokenizer& tok, const NoisyEmbedder& box,
                                      int64_t queries_per_piece, uint64_t seed, int64_t chunk) {
  DAEI_CHECK(queries_per_piece >= 1, "inverter.token_init_queries must be >= 1, got {}", queries_per_piece);
  torch::NoGradGuard ng;
  at::Tensor w = t5.shared->weight;  // (V_model, d_model); the tokenizer's pieces are its first rows
  const int64_t V = std::min<int64_t>(tok.vocab_size(), w.size(0)), dm = w.size(1), d = box.dim();
  TokenInitReport rep;
  rep.pieces = V;
  // Q: d_model × d with orthonormal columns (d ≤ d_model), or its transpose's rows (d > d_model), seeded.
  auto gen = at::detail::createCPUGenerator(seed);
  at::Tensor g = at::normal(0.0, 1.0, {std::max(dm, d), std::min(dm, d)}, gen, torch::TensorOptions().dtype(torch::kFloat64));
  at::Tensor q = std::get<0>(at::linalg_qr(g, "reduced"));  // (max, min), orthonormal columns
  at::Tensor proj = dm >= d ? q : q.t();                    // (dm, d)
  DAEI_CHECK(chunk >= 1, "token_init: chunk must be >= 1, got {}", chunk);
  for (int64_t b = 0; b < V; b += chunk) {
    const int64_t e = std::min(V, b + chunk);
    std::vector<std::string> texts, keys;
    for (int64_t id = b; id < e; ++id)
      for (int64_t j = 0; j < queries_per_piece; ++j) {
        texts.push_back(tok.decode({id}));
        keys.push_back("vocab/" + std::to_string(id) + "/q" + std::to_string(j));
      }
    at::Tensor y = box.embed(texts, keys).to(torch::kFloat64).view({e - b, queries_per_piece, d}).mean(1);
    rep.queries += static_cast<int64_t>(texts.size());
    rep.queried += e - b;
    // A piece with no known word comes back as noise around zero: its mean over k queries has norm about
    // σ·sqrt(d/k). Only rows clearly above that are used.
    const double noise_norm = box.sigma() * std::sqrt(static_cast<double>(d) / static_cast<double>(queries_per_piece));
    at::Tensor norms = y.norm(2, 1);
    for (int64_t i = 0; i < e - b; ++i) {
      const double n = norms[i].item<double>();
      if (n <= 3.0 * noise_norm || n <= 1e-8) continue;
      at::Tensor row = torch::matmul(proj, y[i] / n) * std::sqrt(static_cast<double>(dm));
      w[b + i].copy_(row.to(w.dtype()));
      ++rep.initialised;
    }
    if (rep.initialised == 0 && e < V) {
      rep.gave_up = true;
      break;
    }
  }
  return rep;
}

}  // namespace daei
