// The embedder factory: the one place that knows every kind of clean embedder (embedder.kind). Each kind includes
// embedder.h (the interface) and none includes the factory, so embedder.cpp and the kinds do not include each other.
#include <memory>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "model/embedder.h"
#include "model/http_embedder.h"

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

}  // namespace daei
