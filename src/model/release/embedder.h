// Black-box text embedders and the noisy release interface y = f(x) + N(0, σ²I) (issue 5).
//
//   Embedder          clean f(x): GloveEmbedder (default), HttpEmbedder (http_embedder.h), TransformerEmbedder
//   NoisyEmbedder     what the attacker queries: adds N(0, σ²I) whose value is a pure function of
//                     (noise seed, query key), so caches do not depend on world size, batch size or resume.
//   make_embedder     the configured release interface (embedder.* keys, configs/defaults/embedder.yaml).
#pragma once
#include <atomic>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <torch/types.h>

namespace daei {

class Config;

class Embedder {
 public:
  virtual ~Embedder() = default;
  virtual int64_t dim() const = 0;
  // A fingerprint: model files' hash, or endpoint URL + model name. Caches record it.
  virtual std::string id() const = 0;
  // float32 [texts.size(), dim()] on the CPU. Implementations batch internally and are safe to call from
  // several threads at once.
  virtual at::Tensor embed(const std::vector<std::string>& texts) const = 0;
};

// GloVe word vectors (GloVe 6B 100-d text, or any word-vector text file, converted by launch/convert_glove.py; the
// tests use the 4-d fixture tests/fixtures/glove/mini). Sentence embedding = mean of the vectors of the
// words found, L2-normalised. A text with no known word embeds to the zero vector (documented choice: "nothing
// was seen"; the noisy release of it is pure noise), and is counted in unknown_texts().
class GloveEmbedder final : public Embedder {
 public:
  // dir holds vectors.safetensors ("vectors": float32 [V, d]) and vocab.txt (line i = word of row i), written by
  // launch/convert_glove.py; asset.json there (size + SHA-256 of both) is checked before use.
  explicit GloveEmbedder(const std::string& dir);
  int64_t dim() const override { return dim_; }
  std::string id() const override { return id_; }
  at::Tensor embed(const std::vector<std::string>& texts) const override;

  // GloVe 6B's tokenisation, approximated: lower-case; split on white space; leading and trailing punctuation
  // split off one character at a time; the clitics n't 's 're 've 'll 'd 'm split off; a word not in the
  // vocabulary but with inner hyphens or slashes is split on them.
  std::vector<std::string> tokenize(const std::string& text) const;
  int64_t row(const std::string& word) const;  // -1 when unknown
  const at::Tensor& vectors() const { return vectors_; }
  int64_t unknown_texts() const { return unknown_texts_.load(); }

 private:
  at::Tensor vectors_;
  std::unordered_map<std::string, int32_t> vocab_;
  int64_t dim_ = 0;
  std::string id_;
  mutable std::atomic<int64_t> unknown_texts_{0};
};

// Counter-based N(0, 1) noise: n values for (seed, key), Box–Muller over splitmix64 of a per-key stream.
void gaussian_noise(uint64_t seed, const std::string& key, float* out, int64_t n);

// The release interface. noise_source local: adds σ·noise(seed, key) to the inner embedder's output;
// remote: the inner embedder (a service) is already the noisy release and nothing is added (σ is the declared
// or estimated σ of that service, recorded in caches).
class NoisyEmbedder {
 public:
  NoisyEmbedder(std::shared_ptr<const Embedder> inner, double sigma, uint64_t seed, bool add_noise = true);
  // embedder.noise_mode per_text: the noise is keyed by the text, not by the caller's query key, so that every query
  // of one text returns the same answer (a simulation of server.noise_mode per_text, release_noise.h).
  void key_noise_by_text(bool on) { per_text_ = on; }
  bool noise_keyed_by_text() const { return per_text_; }
  int64_t dim() const { return inner_->dim(); }
  double sigma() const { return sigma_; }
  uint64_t seed() const { return seed_; }
  bool adds_noise() const { return add_noise_; }
  // "<inner id>" plus the noise part; what cache shards record as their embedder.
  std::string id() const;
  const Embedder& inner() const { return *inner_; }

  // Noisy embeddings; keys[i] is the query key of texts[i] (cache: split + "/" + row id).
  at::Tensor embed(const std::vector<std::string>& texts, const std::vector<std::string>& keys) const;
  // Fresh queries without a caller key (server, calibration): key "query/<n>" from a process-local counter.
  at::Tensor embed(const std::vector<std::string>& texts) const;
  at::Tensor clean(const std::vector<std::string>& texts) const;  // offline evaluation only
  // Both from one call of the inner embedder: {clean, noisy} (cache build --clean).
  std::pair<at::Tensor, at::Tensor> embed_with_clean(const std::vector<std::string>& texts,
                                                     const std::vector<std::string>& keys) const;

 private:
  std::shared_ptr<const Embedder> inner_;
  double sigma_;
  uint64_t seed_;
  bool add_noise_;
  bool per_text_ = false;
  mutable std::atomic<uint64_t> counter_{0};
};

// The asset cache: assets.dir, else $DAEI_ASSETS, else ${XDG_CACHE_HOME:-$HOME/.cache}/daei.
std::string asset_dir(const Config& cfg);
// The clean embedder the config names (embedder.kind = glove | http | t5 | bert); embedder_factory.cpp.
std::shared_ptr<Embedder> make_clean_embedder(const Config& cfg);
// The defender's clean model, which every clean row and score of an evaluation reads (clean caches, eval --split
// FILE, the cosine of recovered texts, the clean-to-* references, the DAE table): reference.embedder when it names
// one (glove | t5 | bert, its keys as embedder.*), else the release's own embedder when the noise is added locally.
// A remote release (noise_is_remote) without reference.embedder is refused in one line: its answers are noisy, and
// reading them as clean would score every reference against noise.
std::shared_ptr<Embedder> make_reference_embedder(const Config& cfg);
void require_reference_embedder(const Config& cfg);  // the same refusal, without building the model
// Whether clean rows come from make_reference_embedder rather than from the release's own embedder without its noise
// (one call that returns both): a remote release, or reference.embedder set.
bool clean_rows_from_reference_model(const Config& cfg);
// The release interface: make_clean_embedder + embedder.sigma / noise_seed / noise_source. With `sigma`: at that σ
// (a run's: Release::embedder, release.h); every call is a new handle with its own noise stream.
std::shared_ptr<NoisyEmbedder> make_embedder(const Config& cfg);
std::shared_ptr<NoisyEmbedder> make_embedder(const Config& cfg, double sigma);

// σ̂ from `repeats` queries of each calibration text (paper eq. 3, pooled over texts):
//   σ̂² = Σ_t Σ_i ‖y_ti − ȳ_t‖² / (m · d · (n − 1)),   relative s.e. of σ̂ ≈ 1 / sqrt(2 m d (n − 1)).
struct SigmaEstimate {
  double sigma = 0, rel_se = 0;
  int64_t queries = 0, texts = 0, repeats = 0, dim = 0;
};
// query(texts) returns one fresh noisy query per text.
SigmaEstimate estimate_sigma(const std::function<at::Tensor(const std::vector<std::string>&)>& query,
                             const std::vector<std::string>& texts, int64_t repeats);
// Built-in calibration sentences (plain, in GloVe's vocabulary).
const std::vector<std::string>& calibration_texts();

// Whether the release adds its noise itself (a service: embedder.kind http, or embedder.noise_source remote), so
// that its σ is estimated, not known (release.h).
bool noise_is_remote(const Config& cfg);

// Query averaging: an attacker that pays k queries for a text gets the mean of k answers, each with its own noise
// key — the text's key for query 0 (k = 1 changes nothing), "<key>/q<j>" for query j ≥ 1. `query` is any black box
// (the noisy embedder, its HTTP client, a chunking wrapper); it is called once with every text repeated k times.
using TextQuery = std::function<at::Tensor(const std::vector<std::string>& texts, const std::vector<std::string>& keys)>;
std::string averaging_query_key(const std::string& key, int64_t j);
at::Tensor mean_of_queries(const TextQuery& query, const std::vector<std::string>& texts,
                           const std::vector<std::string>& keys, int64_t k);

}  // namespace daei
