// Every trained stage of a run, in one table (issue 48): `train --stage` reads its folder, budget section and
// inputs here, `pipeline` its place and the flags that add it, the config guard which keys feed its saved work, and
// `eval` the rows each stage's models produce (eval_rows below).
// The order is the pipeline's. Adding a baseline is one StageSpec (and its train function in src/cli/cmd_train.cpp,
// which names an entry without one). The corrected rows' chains (stage 4 and its siblings) are one entry each.
// Light on purpose: no torch, so the config guard and the command line read it cheaply.
#pragma once
#include <string>
#include <vector>

namespace daei {

class Config;

// One corrected system: which inverter produces its hypotheses, which DAE shields it, where it lives.
struct CorrectorChain {
  std::string stage;           // `train --stage` and `hypotheses --for`: "4" | "dae-corrector" | "noisy-corrector" |
                               //   "dae-continued-corrector" | "clean-corrector"
  std::string folder;          // runs/NAME/<folder>: "stage4" | "dae-corrector" | "noisy-corrector"
  std::string system;          // its row: "daei" | "dae-corrected" | "noisy-vec2text" | "clean-to-clean-corrected"
  std::string inverter_stage;  // the inverter it corrects (and starts from): "stage3" | "stage2" | "noisy-inverter"
  std::string dae_stage;       // the frozen DAE: "stage3" | "stage1" | "" (none)
  std::string hyp_split;       // its training hypotheses: cache/<hyp_split>; held-out ones in cache/<val split>
  bool reference = false;      // the clean corrector: clean targets and clean hypothesis embeddings
  bool control = false;        // only with stage3.control and stage4.continued_corrector: dae-corrected over the
                               // continued stage-2 inverter (the dae-corrected-continued row)
  std::string hyp_val_split() const;  // "hyp-val" | "hyp-val-dae" | "hyp-val-noisy" | "hyp-val-clean"
};
const std::vector<CorrectorChain>& corrector_chains();
const CorrectorChain* find_corrector_chain(const std::string& stage);  // by stage, folder or system; null if none

struct StageSpec {
  std::string name;                   // `train --stage NAME`
  std::string folder;                 // runs/<run>/<folder>
  std::string budget;                 // the section of its batch size, steps and grad_accum (baselines: stage2's)
  std::vector<std::string> needs;     // stage folders whose final/ it starts from
  std::string title;                  // its pipeline step
  std::string inputs;                 // what it reads, for `pipeline --dry-run`
  std::vector<std::string> when;      // the config flags that must all be true for the pipeline to run it
  bool in_pipeline = true;            // false: trained by its own command only (the contextual embedder)
  bool t5 = false;                    // a T5 of inverter.*'s shape
  bool fresh_inverter = false;        // a new inverter: with pretrain.enabled it starts from the pretrain stage's T5
  bool pretrain_fed = false;          // pretrain.* feeds it (it is the pretrain stage or starts from / follows it)
  bool seeded = false;                // one of the attack's trained models: train.seed (stages::attack_seed)
  const CorrectorChain* chain = nullptr;  // a corrector: its chain (the pipeline builds its hypotheses first)
};

const std::vector<StageSpec>& stage_catalogue();

// What a row of the leakage table decodes: a trained inverter's input, a corrector's search, zsinvert's generator.
enum class RowReads { clean, noisy, wiener, dae_stage1, dae_stage3, corrected, zsinvert };

// One row of `daei eval`'s tables, in the tables' order: the stage folder whose final model produces it (its inverter,
// its corrector, zsinvert's generator; "" for eval.imported's models), what it reads, the row a corrected row starts
// from, and whether it is a reference outside the threat model. Eval builds its rows from this table, in this order;
// a row whose models are missing from the run is left out.
struct EvalRowSpec {
  std::string system;
  std::string stage;
  RowReads reads = RowReads::noisy;
  std::string round0;      // a corrected row: the inverter row it corrects
  bool reference = false;
  bool bow = false;        // its stage's final model is a bag-of-words inverter (final/bow), not a T5
};
const std::vector<EvalRowSpec>& eval_rows();
const EvalRowSpec* find_eval_row(const std::string& system);  // null if none
// The rows a stage's final models produce (by stage folder), in table order.
std::vector<std::string> eval_rows_of(const std::string& folder);
const StageSpec* find_stage(const std::string& name);  // by `--stage` name; null if none
bool runs_in_pipeline(const StageSpec& s, const Config& cfg);

}  // namespace daei
