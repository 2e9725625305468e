// TransformerEmbedder: lands with the models branch (T5/BERT); until then the factory says so.
#include <memory>

#include "core/config.h"
#include "core/error.h"
#include "model/embedder.h"

namespace daei {
std::shared_ptr<Embedder> make_transformer_embedder(const Config& cfg) {
  DAEI_FAIL("embedder.kind={} needs the transformer embedder, which this build does not have yet",
            cfg.str("embedder.kind"));
}
}  // namespace daei
