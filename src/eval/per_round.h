// The per-round table (issue 21, eval.per_round): every corrected system scored after each correction round, with
// the queries per text it had cost by then — leakage against the attacker's cost. Written to eval/per_round.json,
// per_round.md and per_round.png (gnuplot: BLEU and token F1 against the round, one line a system).
#pragma once
#include <functional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "eval/evaluate.h"

namespace daei {

// One system on one split: a row per round {round, bleu, bleu_ci, token_f1, token_f1_ci, cos, queries_per_text},
// the early-stopped round, and paired verdicts of the last round and of the early-stopped round against round 0.
nlohmann::json score_rounds(const EvalSplit& split, const std::vector<std::string>& references, const SystemRun& run,
                            const CleanEmbedFn& embed_clean,
                            const EvalOptions& opt);

// per_round: {"splits": {split: {system: score_rounds(...)}}, ...} → out_dir/per_round.{json,md,png}; returns the
// Markdown.
std::string write_per_round(const std::string& out_dir, const nlohmann::json& per_round);

}  // namespace daei
