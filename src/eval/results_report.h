// The files of `daei eval` (evaluate.h) from every system's recoveries: results.json, results.md, samples.md,
// recoveries.jsonl and, under eval.per_round, per_round.*: scores with intervals, the floors, paired verdicts.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "eval/evaluate.h"

namespace daei {

class Config;
struct EvalContext;

// Rank 0: scores every system of every split (runs[split][system], seconds alike, in `systems` order) and writes
// the files into the run's eval folder; cut_rows: the texts cut before embedding, by split; t0: the command's start.
void write_results(const Config& cfg, const EvalContext& ctx, const std::vector<SystemSpec>& systems,
                   const std::vector<EvalSplit>& splits, const std::vector<std::vector<SystemRun>>& runs,
                   const std::vector<std::vector<double>>& seconds, const std::map<std::string, int64_t>& cut_rows,
                   const EvalOptions& opt, const std::string& run_dir, const std::string& command_line,
                   std::chrono::steady_clock::time_point t0);

}  // namespace daei
