// The embedder factory: the one place that knows every kind of clean embedder (embedder.kind). Each kind includes
// embedder.h (the interface) and none includes the factory, so embedder.cpp and the kinds do not include each other.
#include <memory>
#include <string>

#include <yaml-cpp/yaml.h>

#include "core/config.h"
#include "core/error.h"
#include "model/release/embedder.h"
#include "model/release/http_embedder.h"

namespace daei {

std::shared_ptr<Embedder> make_transformer_embedder(const Config& cfg);  // transformer_embedder.cpp

std::shared_ptr<Embedder> make_clean_embedder(const Config& cfg) {
  const std::string kind = cfg.str("embedder.kind");
  if (kind == "glove") {
    std::string dir = cfg.str("embedder.glove_dir");
    if (dir.empty()) dir = asset_dir(cfg) + "/glove-100d";
    return std::make_shared<GloveEmbedder>(dir);
  }
  if (kind == "http") return std::make_shared<HttpEmbedder>(HttpEmbedderOptions::from_config(cfg));
  if (kind == "t5" || kind == "bert") return make_transformer_embedder(cfg);
  throw UsageError(fmt::format("embedder.kind must be glove, http, t5 or bert, got '{}'", kind));
}

void require_reference_embedder(const Config& cfg) {
  const std::string kind = cfg.str("reference.embedder.kind");
  DAEI_CHECK(!kind.empty() || !noise_is_remote(cfg),
             "the release ({}) adds its noise remotely, so its answers are not clean embeddings: clean rows and "
             "scores (cache build --clean, eval, the clean-to-* references, the DAE table) need reference.embedder "
             "naming the defender's local clean model (reference.embedder.kind: glove | t5 | bert)",
             cfg.str("embedder.kind"));
  DAEI_CHECK(kind != "http", "reference.embedder.kind must be a local model (glove, t5 or bert), got http");
}

bool clean_rows_from_reference_model(const Config& cfg) {
  return noise_is_remote(cfg) || !cfg.str("reference.embedder.kind").empty();
}

std::shared_ptr<Embedder> make_reference_embedder(const Config& cfg) {
  require_reference_embedder(cfg);
  if (cfg.str("reference.embedder.kind").empty()) return make_clean_embedder(cfg);
  // The embedder.* keys with reference.embedder's in their place: one factory builds both.
  YAML::Node root = YAML::Clone(cfg.root());
  for (const auto& kv : cfg.node("reference.embedder")) root["embedder"][kv.first.as<std::string>()] = kv.second;
  return make_clean_embedder(Config(root));
}

}  // namespace daei
