// What `daei eval` evaluates: the trained models of a run directory, loaded once, and the systems built on them.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "eval/system_spec.h"
#include "model/attack/dae.h"
#include "model/net/generate.h"
#include "model/attack/inverter.h"
#include "model/text/tokenizer_spm.h"
#include "stages/recipes/wiener.h"

namespace daei {

class Communicator;
class Config;
class Embedder;
class CorrectorImpl;
class BowInverterImpl;
class Release;
class NoisyEmbedder;
struct CorrectorCall;

// The σ the attack calls its DAE at, one rule for the systems, the DAE table, `eval --split FILE` and the sweep: the
// σ the split was noised at (EvalSplit::sigma: its cache manifest's, which is the run's release σ, embedder.sigma or
// a remote release's σ̂; the same release σ for --split FILE; the swept σ in the sweep), or, in a sensitivity study,
// the σ stage 1 was told to assume (stage1.sigma.assumed).
struct DaeSigma {
  double assumed = 0;  // stage1.sigma.assumed; 0 = off
  double operator()(const EvalSplit& split) const { return assumed > 0 ? assumed : split.sigma; }
};

// What eval's rows, tables and the sweep read. Built only with the run's release (issue 64: `eval --dae-only` filled
// one by hand without it, and the DAE table dereferenced the empty pointer): every constructor takes it, and
// release() never returns a dangling or null one. The other shared members are either set here (decoded) or
// null-checked by their readers (dae1, dae3, wiener, the inverters), or read only by the rows make_eval_context adds
// (tok, clean_embedder).
struct EvalContext {
  explicit EvalContext(const Release& release);
  explicit EvalContext(std::shared_ptr<const Release> release);  // refused when null

  // The run's release and its σ (every query of a row goes to it; the DAE table and the floors open its noisy rows).
  const Release& release() const { return *release_; }

  // The ranks a system's texts are split over (every system's recover() is then a collective that returns every
  // text on every rank); null: this process alone.
  Communicator* comm = nullptr;
  std::shared_ptr<SpmTokenizer> tok;
  std::shared_ptr<Embedder> clean_embedder;  // cos of recovered vs true texts (evaluation only)
  std::string embedder_id;
  int64_t max_length_eval = 32, batch_size = 64;
  GenerateOptions decoding;  // the inverter rows' decoding (eval.*: num_beams, repetition controls); max_length is max_length_eval
  DaeSigma dae_sigma;
  // Models that exist in the run directory (null otherwise).
  std::shared_ptr<Dae> dae1, dae3;
  // The final inverters of the stages eval's rows decode with (eval_rows(), stages/recipes/catalogue.h), by stage
  // folder: clean-inverter, noisy-inverter, wiener-inverter, stage2, stage2-continued, stage3.
  std::map<std::string, std::shared_ptr<InverterImpl>> inverters;
  std::shared_ptr<InverterImpl> inverter(const std::string& folder) const;  // null when not trained
  // The bag-of-words inverters (bow-noisy, bow-dae, bow-clean), by stage folder, when trained.
  std::map<std::string, std::shared_ptr<BowInverterImpl>> bows;
  std::shared_ptr<const LinearEstimator> wiener;  // wiener-inverter's filter, fitted on noisy training rows
  std::shared_ptr<InverterImpl> imported_inv;  // eval.imported's inverter (a `daei import vec2text` folder; issue 49)
  // The corrected systems, by row name (daei, dae-corrected, noisy-vec2text; imported-vec2text: eval.imported's).
  std::map<std::string, std::function<SystemRun(const EvalSplit&)>> corrected;
  bool daei_clean_hypotheses = false;  // protocol.clean_hypotheses: the daei row reads clean hypothesis embeddings
  // The zsinvert rows (zsinvert, zsinvert-dae) when zsinvert.enabled and runs/NAME/lm/final exist; each runs on
  // the first zsinvert_max_texts texts of a split (0: all).
  std::map<std::string, std::function<SystemRun(const EvalSplit&)>> zsinvert;
  int64_t zsinvert_max_texts = 0;
  double zsinvert_naturalness = 0;  // zsinvert.naturalness: the weight of the generator's log-probability in the score
  // Texts already decoded, by "system/split" (a corrected system starts from its round-0 system's); shared by the
  // copies of a context (the corrected rows' closures hold one).
  std::shared_ptr<std::map<std::string, std::vector<std::string>>> decoded =
      std::make_shared<std::map<std::string, std::vector<std::string>>>();
  // The same texts' generated ids (decoder start first, trailing pads dropped): an imported vec2text corrector reads
  // its hypotheses as generate() gave them (issue 67).
  std::shared_ptr<std::map<std::string, std::vector<std::vector<int64_t>>>> decoded_ids =
      std::make_shared<std::map<std::string, std::vector<std::vector<int64_t>>>>();
  // Called after every corrector call of every corrected row (`daei invert --dump-logits`; empty: none). Shared by
  // the copies of a context, so it can be set after the rows are built.
  std::shared_ptr<std::function<void(const CorrectorCall&)>> observe_corrector =
      std::make_shared<std::function<void(const CorrectorCall&)>>();

 private:
  std::shared_ptr<const Release> release_;  // never null
};

EvalContext make_eval_context(const Config& cfg, const std::string& run_dir, const Release& release,
                              Communicator* comm = nullptr);
// ctx.comm, or a single-process communicator when it is null.
Communicator& comm_of(const EvalContext& ctx);
// In table order: references first, then the attack's chain.
std::vector<SystemSpec> available_systems(const EvalContext& ctx);
// The truth as the systems are asked to produce it: truncated to max_length_eval tokens, decoded (vec2text's rule).
std::vector<std::string> reference_texts(const EvalContext& ctx, const std::vector<std::string>& texts);
// Greedy / beam decoding of embeddings with an inverter, batched, with a progress line. A collective over ctx.comm:
// every rank passes all rows and decodes its share, whole batches of batch_size rows (dist/share.h: the batches of
// one process, so the same texts on any world size), and every rank gets every text in row order.
std::vector<std::string> decode_texts(const EvalContext& ctx, InverterImpl& inv, const at::Tensor& e,
                                      const std::string& what);
// decode_texts with each text's generated ids (decoder start first, trailing pads dropped), in the same order.
struct Decoded {
  std::vector<std::string> texts;
  std::vector<std::vector<int64_t>> ids;
};
// A guided inverter (its cfg.guide_words > 0) reads `guides`, a guide line a row of e (stages/recipes/guided.h).
Decoded decode_hypotheses(const EvalContext& ctx, InverterImpl& inv, const at::Tensor& e, const std::string& what,
                          const std::vector<std::string>* guides = nullptr);

// The imported rows (eval.imported, issue 49) of a `daei import vec2text` folder `dir` into `c` (its tok, decoding,
// max_length_eval and batch_size set): imported-inverter, and imported-vec2text (its corrector over that inverter,
// querying `release` with the correct.* options) when the folder holds a corrector. `dim`: the embeddings' dimension;
// `key` names the folder's origin in refusals. `daei invert --imported DIR` runs them without a trained run.
void add_imported_systems(const Config& cfg, EvalContext& c, const std::string& dir, int64_t dim,
                          const std::string& key, const std::function<std::shared_ptr<NoisyEmbedder>()>& release);
// DAE(y, σ) in batches.
at::Tensor denoise(Dae& dae, const at::Tensor& y, double sigma);

struct DaeTables {
  nlohmann::json json_block;
  std::string markdown;
};
// The DAE table on val and test: stage 1 (and stage 3's) DAE beside the Wiener filters. Needs ctx.dae1 (an error
// naming the missing folder otherwise).
DaeTables dae_tables(const Config& cfg, const EvalContext& ctx, const std::string& run_dir);

}  // namespace daei
