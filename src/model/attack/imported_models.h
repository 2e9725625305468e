// Models made outside the run (issue 49: a `daei import vec2text` folder, or another run's inverter) checked against
// the run that reads them: their embedding dimension and their tokenizer must be the run's. Every refusal is one line
// naming the config key that pointed at the folder.
//
// Tokenizer: a run has one tokenizer (inverter.tokenizer, or the one trained into runs/NAME/tokenizer/); it truncates
// the references, cuts the texts before they are embedded, encodes every row's hypotheses and names the tokens a
// trained model emits. So a model made with another tokenizer is refused rather than given its own: when the folder
// holds a spiece.model (copied by the import) it must be the run's file byte for byte; without one, the model's T5
// vocabulary must be the size the run's tokenizer gives a T5.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "model/attack/corrector.h"
#include "model/attack/inverter.h"
#include "model/text/tokenizer_spm.h"

namespace daei {

// T5 keeps 100 sentinel ids after its SentencePiece pieces and pads its vocabulary to a multiple of 128 (t5-base:
// 32000 pieces, 32128 rows): a T5 with more rows than that beyond the run's pieces was made for another tokenizer.
constexpr int64_t kT5RowsBeyondPieces = 100 + 128;

// `model_dir`'s tokenizer against the run's `tok` (see above); `t5_vocab` is the model's T5 vocabulary.
void check_tokenizer_fits(const std::string& model_dir, int64_t t5_vocab, const SpmTokenizer& tok,
                          const std::string& key);

// A `daei import vec2text` folder: DIR/inverter/ and, when present, DIR/corrector/ (null otherwise).
struct ImportedModels {
  std::shared_ptr<InverterImpl> inverter;
  std::shared_ptr<CorrectorImpl> corrector;
};
// Loads it in eval mode (the corrector reads vec2text's hypothesis ids: corrector.h, HypothesisIds), refusing a missing folder, an embedding dimension other than `run_dim` or another tokenizer.
ImportedModels load_imported_models(const std::string& dir, int64_t run_dim, const SpmTokenizer& tok,
                                    const std::string& key);

}  // namespace daei
