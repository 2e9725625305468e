// `daei eval`: the leakage table. Every trained system recovers texts from the embeddings of each evaluation split
// (test, ood-*, or a JSON-lines file of texts), and is scored against the truth with BLEU, token F1, content-word
// F1 and recall (metrics.h), ROUGE-L, exact match and the cosine of clean embeddings (recovered vs true), each with a bootstrap 95 % interval over the
// split's texts; neighbouring systems get paired-bootstrap verdicts. Systems (those whose final/ exists):
//   clean-to-clean, clean-to-noisy   the clean-trained inverter on clean / noisy inputs (references, outside the
//                                    threat model)
//   clean-to-*-corrected             the same with the clean corrector (reference.corrector; references)
//   noisy-inverter                   inverter trained and run on y
//   dae-only                         stage-2 inverter on DAE₁(y)
//   joint-no-corrector               stage-3 inverter on DAE₃(y)
//   noisy-vec2text, dae-corrected,   the corrected rows (iterative correction on top of noisy-inverter, dae-only
//   daei                             and joint-no-corrector) when their corrector's final/ exists
// Writes eval/results.json (DESIGN.md schema + command, revision, wall time), results.md, samples.md.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>
#include <torch/types.h>

#include "eval/system_spec.h"
#include "eval/text_shape.h"  // distinct, top template, loops, artefacts: columns of every table

namespace daei {

class Communicator;
class Config;
class Release;
class SpmTokenizer;

struct EvalOptions {
  int64_t max_texts = 500;   // per split; 0 = all
  int64_t batch_size = 64;
  int64_t bootstrap = 1000;
  uint64_t seed = 1234;
  int64_t samples = 20;      // texts shown in samples.md
};

struct SystemScores {
  std::map<std::string, double> mean;  // bleu, token_f1, rouge_l, exact, cos, queries_per_text, shape shares
  std::map<std::string, std::pair<double, double>> ci;
  std::vector<double> bleu, token_f1, content_f1;  // per text (for paired verdicts)
  std::vector<std::string> recovered;
  std::string template_ngram;  // the top template's 3-gram (text_shape.h)
  double index_queries = 0;    // queries spent once before any text (SystemRun::index_queries)
  bool reference = false;
  bool floor = false;
  // The per-text vector of "bleu", "token_f1" or "content_f1"; throws on another name.
  const std::vector<double>& per_text(const std::string& metric) const;
};

// Scores recovered texts against the truth (references: the truth truncated to the evaluation length, decoded);
// cos from the clean embeddings `embed_clean(recovered)` against split.clean.
SystemScores score_system(const EvalSplit& split, const std::vector<std::string>& references, const SystemRun& run,
                          const CleanEmbedFn& embed_clean,
                          const EvalOptions& opt);


// vec2text's rule (reference notes §4): the evaluated text is the text embedded. Each text of `split` longer than
// max_length pieces of `tok` is replaced by its first max_length pieces, decoded, and queried again through
// `query` (clean, noisy rows; keys "eval-cut/SPLIT/ROW"); the other rows are kept as cached. Returns the number
// of texts cut.
using CleanNoisyFn = std::function<std::pair<at::Tensor, at::Tensor>(const std::vector<std::string>& texts,
                                                                     const std::vector<std::string>& keys)>;
int64_t cut_before_embedding(EvalSplit& split, const SpmTokenizer& tok, int64_t max_length, const CleanNoisyFn& query);

// The whole command, a collective over comm: every system's texts are split over the ranks (systems.h) and
// gathered back in order; rank 0 scores them and writes the files, which are the same for any world size (timing
// aside). extra_files: JSON-lines texts to embed, noise and evaluate like a split (queried by rank 0). Returns the
// exit code.
int run_eval(const Config& cfg, Communicator& comm, const std::string& run_dir, const Release& release,
             const std::vector<std::string>& extra_files, const std::string& command_line);

}  // namespace daei
