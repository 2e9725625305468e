// Token embeddings that start where the black box puts each token (issue 22: an inverter that is not the
// bottleneck). The attacker may query the release with any text it likes, so it queries every piece of its own
// vocabulary, k times each with its own noise key, and starts the T5's shared token embeddings (tied to the LM
// head) from those answers: row p = sqrt(d_model) · Q · normalize(mean_k f̃(piece p)), with Q a seeded
// (d_model × d) matrix of orthonormal columns. An inverter then starts with an output layer in which tokens the
// embedder places together score together, instead of learning that geometry from scratch. Every inverter of a run
// gets the same rows (fixed keys "vocab/<id>/q<j>"), so the systems still start from equal weights. Pieces the
// embedder maps to (near) zero (no known word) keep their random rows. No clean embedding is read.
#pragma once
#include <cstdint>
#include <string>

namespace daei {

class NoisyEmbedder;
class SpmTokenizer;
class T5ModelImpl;

struct TokenInitReport {
  int64_t pieces = 0, initialised = 0, queries = 0;
  int64_t queried = 0;   // pieces queried
  bool gave_up = false;  // no piece of the first chunk rose above the noise: the rest were not queried
  std::string describe() const;  // the stages' log line
};

// Pieces are queried chunk by chunk (`chunk` pieces, k queries each). Where no piece of the first chunk rises above
// the noise, none will: on an L2-normalised release (clean norm 1) at σ·sqrt(d/k) ≥ 1/3, e.g. MiniLM at σ 0.18
// (noise norm 1.76), so the rest is not queried and the random rows stay.
TokenInitReport init_token_embeddings(T5ModelImpl& t5, const SpmTokenizer& tok, const NoisyEmbedder& box,
                                      int64_t queries_per_piece, uint64_t seed, int64_t chunk = 512);

}  // namespace daei
