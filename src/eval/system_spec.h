// What an evaluated system is: a function from a split (texts with their clean and noisy embeddings) to the texts
// it recovers. systems.h builds them from a run directory; evaluate.h scores them. Both include this, not each
// other.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include <torch/types.h>

#include "data/eval_split.h"

namespace daei {

// Clean embeddings of texts (the defender's model): what scores a recovery's cosine.
using CleanEmbedFn = std::function<at::Tensor(const std::vector<std::string>&)>;

// A system maps a split to recovered texts (and the black-box queries it spent per text).
struct SystemRun {
  std::vector<std::string> texts;
  std::vector<double> queries;  // per text; empty = 0
  // A corrected system under eval.per_round: every round's answers (round 0 = its inverter alone) and the
  // cumulative queries per text by then; texts/queries above are the early-stopped round's.
  std::vector<std::vector<std::string>> round_texts;
  std::vector<std::vector<double>> round_queries;
  int64_t early_stop_round = -1;
  // Queries spent once for every text before any is attacked (floor-retrieval's index: the train cache's answers).
  double index_queries = 0;
};
// An inverter-only run: texts, no queries.
inline SystemRun texts_run(std::vector<std::string> texts) {
  SystemRun r;
  r.texts = std::move(texts);
  return r;
}
struct SystemSpec {
  std::string name;
  bool reference = false;  // outside the threat model: labelled in every table
  std::function<SystemRun(const EvalSplit&)> recover;
  bool floor = false;  // a floor (eval/floors.h): what a row must beat to count as a recovery
};

}  // namespace daei
