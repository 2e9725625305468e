// The JSON files of a stage folder that a resume reads back: a checkpoint's state.json and metrics.jsonl. A run
// folder may be damaged (disk full, a copy cut short, an edit), so these readers turn any bytes into a daei::Error
// naming the file or a value, and take text (no libtorch) so tests/fuzz/fuzz_stage_files.cpp fuzzes them.
#pragma once
#include <cstdint>
#include <string>

namespace daei {

// state.json: where a run stands (the sampler's position follows from step) and what a resume must match.
struct CheckpointState {
  std::string stage;              // log tag of the stage
  int64_t step = 0;               // optimizer steps done
  int64_t steps_per_epoch = 1;
  uint64_t seed = 0;
  int64_t n_rows = 0;             // training rows
  int64_t global_batch = 0;
  int64_t grad_accum = 1;
  int64_t world_size = 1;         // ranks that wrote it (a resume may use any number)
};

// The fields a resume checks and restores (global_batch, sampler.n_rows, step, world_size) of a state.json's text;
// `source` names it in errors.
CheckpointState parse_checkpoint_state(const std::string& text, const std::string& source);

// The lines of a metrics.jsonl text whose step is <= step, each ending in '\n' (unreadable lines dropped).
std::string metrics_lines_until(const std::string& text, int64_t step);

}  // namespace daei
