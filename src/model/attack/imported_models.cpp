#include "model/attack/imported_models.h"

#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"

namespace daei {

void check_tokenizer_fits(const std::string& model_dir, int64_t t5_vocab, const SpmTokenizer& tok,
                          const std::string& key) {
  const std::string spiece = model_dir + "/spiece.model";
  if (file_exists(spiece)) {
    DAEI_CHECK(read_file(spiece) == read_file(tok.path()),
               "{}: {} is not the run's tokenizer {} (a run has one tokenizer: start a run with "
               "inverter.tokenizer: {})",
               key, spiece, tok.path(), spiece);
    return;
  }
  const int64_t pieces = tok.vocab_size();
  DAEI_CHECK(t5_vocab >= pieces && t5_vocab <= pieces + kT5RowsBeyondPieces,
             "{}: {}'s T5 has {} token rows but the run's tokenizer {} has {} pieces: it was made for another "
             "tokenizer (vec2text's GTR-base models read t5-base's spiece.model: set inverter.tokenizer to it)",
             key, model_dir, t5_vocab, tok.path(), pieces);
}

namespace {

void check_dim_fits(const std::string& model_dir, int64_t model_dim, int64_t run_dim, const std::string& key) {
  DAEI_CHECK(model_dim == run_dim, "{}: {} reads {}-dimensional embeddings, the run's are {}-dimensional", key,
             model_dir, model_dim, run_dim);
}

}  // namespace

ImportedModels load_imported_models(const std::string& dir, int64_t run_dim, const SpmTokenizer& tok,
                                    const std::string& key) {
  const std::string inv_dir = dir + "/inverter", cor_dir = dir + "/corrector";
  DAEI_CHECK(file_exists(dir), "{}: {}: no such folder", key, dir);
  DAEI_CHECK(file_exists(inv_dir + "/inverter.json"),
             "{}: {} is not a folder written by `daei import vec2text` (no inverter/inverter.json)", key, dir);
  ImportedModels m;
  m.inverter = InverterImpl::load(inv_dir);
  check_dim_fits(inv_dir, m.inverter->cfg.dim, run_dim, key);
  check_tokenizer_fits(inv_dir, m.inverter->cfg.t5.vocab_size, tok, key);
  if (file_exists(cor_dir + "/corrector.json")) {
    m.corrector = CorrectorImpl::load(cor_dir);
    // A vec2text corrector whatever its corrector.json says: folders imported before issue 67 have no
    // hypothesis_ids and would read as daei's convention.
    m.corrector->cfg.hypothesis_ids = HypothesisIds::vec2text;
    check_dim_fits(cor_dir, m.corrector->cfg.dim, run_dim, key);
    check_tokenizer_fits(cor_dir, m.corrector->cfg.t5.vocab_size, tok, key);
  }
  LOG_INFO("[model] imported {} from {} ({}): d {}, T5 vocabulary {}",
           m.corrector ? "inverter and corrector" : "inverter", dir, key, run_dim, m.inverter->cfg.t5.vocab_size);
  return m;
}

}  // namespace daei
