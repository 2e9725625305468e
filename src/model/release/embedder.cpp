#include "model/release/embedder.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "core/sha256.h"

namespace daei {
namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------------------------
// GloVe

namespace {

void check_asset(const std::string& dir) {
  const std::string manifest = dir + "/asset.json";
  DAEI_CHECK(file_exists(manifest), "GloVe asset missing: {} not found (run launch/setup.sh, or set embedder.glove_dir)",
             manifest);
  auto a = nlohmann::json::parse(read_file(manifest));
  for (auto& [name, want] : a.at("files").items()) {
    const std::string p = dir + "/" + name;
    DAEI_CHECK(file_exists(p), "GloVe asset damaged: {} is missing (run launch/setup.sh to convert it again)", p);
    DAEI_CHECK(int64_t(fs::file_size(p)) == want.at("size").get<int64_t>(),
               "GloVe asset damaged: {} has {} bytes, asset.json says {} (run launch/setup.sh)", p, fs::file_size(p),
               want.at("size").get<int64_t>());
    DAEI_CHECK(sha256_file(p) == want.at("sha256").get<std::string>(),
               "GloVe asset damaged: SHA-256 of {} differs from asset.json (run launch/setup.sh)", p);
  }
}

bool is_punct(unsigned char c) { return c < 128 && std::ispunct(c); }

}  // namespace

GloveEmbedder::GloveEmbedder(const std::string& dir) {
  check_asset(dir);
  auto tensors = load_safetensors(dir + "/vectors.safetensors");
  DAEI_CHECK(tensors.count("vectors") && tensors["vectors"].dim() == 2 &&
                 tensors["vectors"].scalar_type() == torch::kFloat32,
             "{}/vectors.safetensors: no float32 2-d tensor named 'vectors'", dir);
  vectors_ = tensors["vectors"].contiguous();
  dim_ = vectors_.size(1);
  std::ifstream in(dir + "/vocab.txt");
  DAEI_CHECK(in, "cannot read {}/vocab.txt", dir);
  std::string w;
  int32_t i = 0;
  vocab_.reserve(vectors_.size(0) * 2);
  while (std::getline(in, w)) vocab_.emplace(w, i++);
  DAEI_CHECK(i == vectors_.size(0), "{}: vocab.txt has {} words, vectors.safetensors {} rows", dir, i,
             vectors_.size(0));
  auto a = nlohmann::json::parse(read_file(dir + "/asset.json"));
  id_ = fmt::format("glove-{}d@{}", dim_, a["files"]["vectors.safetensors"]["sha256"].get<std::string>().substr(0, 16));
}

int64_t GloveEmbedder::row(const std::string& word) const {
  auto it = vocab_.find(word);
  return it == vocab_.end() ? -1 : it->second;
}

std::vector<std::string> GloveEmbedder::tokenize(const std::string& text) const {
  std::string low = text;
  for (auto& c : low) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::vector<std::string> out;
  static const char* clitics[] = {"n't", "'s", "'re", "'ve", "'ll", "'d", "'m"};
  size_t i = 0;
  while (i < low.size()) {
    while (i < low.size() && std::isspace(static_cast<unsigned char>(low[i]))) ++i;
    size_t j = i;
    while (j < low.size() && !std::isspace(static_cast<unsigned char>(low[j]))) ++j;
    if (j == i) break;
    std::string w = low.substr(i, j - i);
    i = j;
    std::vector<std::string> head, tail;
    while (!w.empty() && is_punct(w.front()) && row(w) < 0) { head.push_back(w.substr(0, 1)); w.erase(0, 1); }
    while (!w.empty() && is_punct(w.back()) && row(w) < 0) { tail.insert(tail.begin(), w.substr(w.size() - 1)); w.pop_back(); }
    for (const char* c : clitics) {
      size_t n = std::strlen(c);
      if (w.size() > n && w.compare(w.size() - n, n, c) == 0 && row(w) < 0) {
        tail.insert(tail.begin(), c);
        w.erase(w.size() - n);
        break;
      }
    }
    out.insert(out.end(), head.begin(), head.end());
    if (!w.empty()) {
      if (row(w) < 0 && w.find_first_of("-/") != std::string::npos) {
        size_t s = 0;
        for (size_t k = 0; k <= w.size(); ++k)
          if (k == w.size() || w[k] == '-' || w[k] == '/') {
            if (k > s) out.push_back(w.substr(s, k - s));
            if (k < w.size()) out.push_back(w.substr(k, 1));
            s = k + 1;
          }
      } else {
        out.push_back(w);
      }
    }
    out.insert(out.end(), tail.begin(), tail.end());
  }
  return out;
}

at::Tensor GloveEmbedder::embed(const std::vector<std::string>& texts) const {
  at::Tensor out = torch::zeros({int64_t(texts.size()), dim_}, torch::kFloat32);
  const float* V = vectors_.data_ptr<float>();
  float* O = out.data_ptr<float>();
  std::vector<double> acc(dim_);
  for (size_t t = 0; t < texts.size(); ++t) {
    std::fill(acc.begin(), acc.end(), 0.0);
    int64_t found = 0;
    for (const auto& w : tokenize(texts[t])) {
      int64_t r = row(w);
      if (r < 0) continue;
      const float* v = V + r * dim_;
      for (int64_t k = 0; k < dim_; ++k) acc[k] += v[k];
      ++found;
    }
    if (!found) {
      unknown_texts_.fetch_add(1);
      continue;  // zero vector, see the header
    }
    double norm = 0;
    for (double x : acc) norm += x * x;  // the mean's norm is the sum's / found; the 1/found cancels
    norm = std::sqrt(norm);
    if (norm == 0) continue;
    for (int64_t k = 0; k < dim_; ++k) O[t * dim_ + k] = static_cast<float>(acc[k] / norm);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Noise

void gaussian_noise(uint64_t seed, const std::string& key, float* out, int64_t n) {
  const uint64_t base = splitmix64(seed ^ hash_key(key));
  for (int64_t i = 0; i < n; i += 2) {
    // two uniforms in (0, 1] and [0, 1) from the counter stream of this key
    uint64_t a = splitmix64(base + 2 * uint64_t(i) + 1), b = splitmix64(base + 2 * uint64_t(i) + 2);
    double u1 = ((a >> 11) + 1) * 0x1.0p-53, u2 = (b >> 11) * 0x1.0p-53;
    double r = std::sqrt(-2.0 * std::log(u1)), th = 2.0 * M_PI * u2;
    out[i] = static_cast<float>(r * std::cos(th));
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(th));
  }
}

NoisyEmbedder::NoisyEmbedder(std::shared_ptr<const Embedder> inner, double sigma, uint64_t seed, bool add_noise)
    : inner_(std::move(inner)), sigma_(sigma), seed_(seed), add_noise_(add_noise) {
  DAEI_CHECK(sigma_ >= 0 && std::isfinite(sigma_), "embedder.sigma must be finite and >= 0, got {}", sigma_);
}

std::string NoisyEmbedder::id() const {
  return add_noise_ ? fmt::format("{}+gauss(sigma={},seed={}{})", inner_->id(), sigma_, seed_, per_text_ ? ",per_text" : "")
                    : fmt::format("{}(remote noise, sigma={})", inner_->id(), sigma_);
}

at::Tensor NoisyEmbedder::clean(const std::vector<std::string>& texts) const {
  DAEI_CHECK(add_noise_, "clean embeddings are not available: {} is a remote noisy release (set reference.embedder)",
             inner_->id());
  return inner_->embed(texts);
}

std::pair<at::Tensor, at::Tensor> NoisyEmbedder::embed_with_clean(const std::vector<std::string>& texts,
                                                                   const std::vector<std::string>& keys) const {
  DAEI_CHECK(texts.size() == keys.size(), "{} texts but {} query keys", texts.size(), keys.size());
  DAEI_CHECK(add_noise_, "clean embeddings are not available: {} is a remote noisy release (set reference.embedder)",
             inner_->id());
  at::Tensor x = inner_->embed(texts);
  if (sigma_ == 0) return {x, x.clone()};
  at::Tensor y = x.clone();
  const int64_t d = y.size(1);
  std::vector<float> z(d);
  float* Y = y.data_ptr<float>();
  for (size_t i = 0; i < keys.size(); ++i) {
    gaussian_noise(seed_, per_text_ ? "text/" + texts[i] : keys[i], z.data(), d);
    for (int64_t k = 0; k < d; ++k) Y[i * d + k] += static_cast<float>(sigma_ * z[k]);
  }
  return {x, y};
}

at::Tensor NoisyEmbedder::embed(const std::vector<std::string>& texts, const std::vector<std::string>& keys) const {
  if (!add_noise_ || sigma_ == 0) {
    DAEI_CHECK(texts.size() == keys.size(), "{} texts but {} query keys", texts.size(), keys.size());
    return inner_->embed(texts);
  }
  return embed_with_clean(texts, keys).second;
}

at::Tensor NoisyEmbedder::embed(const std::vector<std::string>& texts) const {
  std::vector<std::string> keys(texts.size());
  uint64_t first = counter_.fetch_add(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) keys[i] = fmt::format("query/{}", first + i);
  return embed(texts, keys);
}

// ---------------------------------------------------------------------------------------------------------------
// Factory

std::string asset_dir(const Config& cfg) {
  std::string d = cfg.str("assets.dir");
  if (!d.empty()) return d;
  if (const char* e = std::getenv("DAEI_ASSETS"); e && *e) return e;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/daei";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/daei";
}

bool noise_is_remote(const Config& cfg) {
  const std::string src = cfg.str("embedder.noise_source");
  if (src == "auto") return cfg.str("embedder.kind") == "http";
  if (src == "local") return false;
  if (src == "remote") return true;
  throw UsageError(fmt::format("embedder.noise_source must be auto, local or remote, got '{}'", src));
}

std::shared_ptr<NoisyEmbedder> make_embedder(const Config& cfg, double sigma) {
  const int64_t seed = cfg.integer("embedder.noise_seed");
  auto emb = std::make_shared<NoisyEmbedder>(make_clean_embedder(cfg), sigma, uint64_t(seed), !noise_is_remote(cfg));
  const std::string mode = cfg.str("embedder.noise_mode");
  DAEI_CHECK(mode == "fresh" || emb->adds_noise(), "embedder.noise_mode {} simulates a release's noise; a remote release "
             "adds its own (set it on that service: server.noise_mode)", mode);
  emb->key_noise_by_text(mode == "per_text");
  return emb;
}

std::shared_ptr<NoisyEmbedder> make_embedder(const Config& cfg) { return make_embedder(cfg, cfg.real("embedder.sigma")); }

// ---------------------------------------------------------------------------------------------------------------
// σ estimation (paper eq. 3)

SigmaEstimate estimate_sigma(const std::function<at::Tensor(const std::vector<std::string>&)>& query,
                             const std::vector<std::string>& texts, int64_t repeats) {
  DAEI_CHECK(repeats >= 2, "estimate-sigma needs at least 2 repeated queries per text, got {}", repeats);
  DAEI_CHECK(!texts.empty(), "estimate-sigma needs at least one calibration text");
  const int64_t m = texts.size();
  std::vector<at::Tensor> ys;
  for (int64_t r = 0; r < repeats; ++r) ys.push_back(query(texts).to(torch::kFloat64));
  at::Tensor Y = torch::stack(ys);  // [n, m, d]
  const int64_t d = Y.size(2);
  at::Tensor dev = Y - Y.mean(0, true);
  double ss = dev.pow(2).sum().item<double>();
  double dof = double(m) * d * (repeats - 1);
  SigmaEstimate e;
  e.sigma = std::sqrt(ss / dof);
  e.rel_se = 1.0 / std::sqrt(2.0 * dof);
  e.queries = m * repeats;
  e.texts = m;
  e.repeats = repeats;
  e.dim = d;
  return e;
}

const std::vector<std::string>& calibration_texts() {
  static const std::vector<std::string> t = {
      "the cat sat on the mat",
      "a quick brown fox jumps over the lazy dog",
      "the president spoke to congress about the economy",
      "rain is expected in the north later this week",
      "she bought two tickets for the evening train",
      "the committee will meet again next year",
      "water boils at one hundred degrees",
      "he wrote a long letter to his brother",
  };
  return t;
}

std::string averaging_query_key(const std::string& key, int64_t j) {
  return j == 0 ? key : key + "/q" + std::to_string(j);
}

at::Tensor mean_of_queries(const TextQuery& query, const std::vector<std::string>& texts,
                           const std::vector<std::string>& keys, int64_t k) {
  DAEI_CHECK(k >= 1, "queries per text must be >= 1, got {}", k);
  DAEI_CHECK(texts.size() == keys.size(), "query: {} texts but {} keys", texts.size(), keys.size());
  if (k == 1) return query(texts, keys);
  std::vector<std::string> t, q;
  for (size_t i = 0; i < texts.size(); ++i)
    for (int64_t j = 0; j < k; ++j) {
      t.push_back(texts[i]);
      q.push_back(averaging_query_key(keys[i], j));
    }
  return query(t, q).view({static_cast<int64_t>(texts.size()), k, -1}).mean(1);
}

}  // namespace daei
