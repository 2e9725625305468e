// daei invert --input FILE [--output FILE] [--system NAME]: texts recovered from noisy embeddings with one of the
// run's trained rows — by default the strongest attack (the daei system, stage 4 corrector querying the configured
// black box, when trained, else the stage-3 or stage-2 inverter behind its DAE); `--list` prints the rows the run
// has. Input: JSON lines {"embedding": [...]} or .npy (float32/float64, [n, d]).
// --imported DIR: a `daei import vec2text` folder's models alone, no trained run needed (issue 67): its inverter
// (imported-inverter) and, with a corrector, vec2text's correction over it querying the configured black box
// (imported-vec2text, the default). --dump-logits FILE: the first correction round's corrector inputs and its
// first-step logits, as safetensors.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/embedding_input.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "data/run_layout.h"
#include "eval/systems.h"
#include "core/safetensors.h"
#include "eval/correction.h"
#include "model/release/release.h"
#include "stages/recipes/shared_options.h"

namespace daei::cli {
namespace {

struct InvertCommand {
  EmbeddingFiles files;
  std::string system;  // --system: a row of the run (default: the strongest attack)
  bool list = false;   // --list: print the rows and exit
  std::string imported;     // --imported: a `daei import vec2text` folder instead of the run's rows
  std::string dump_logits;  // --dump-logits: the first correction round's inputs and first-step logits
};

void add_flags(CLI::App& app, InvertCommand& cmd) {
  add_embedding_files(app, cmd.files);
  app.get_option("--input")->required(false);  // --list needs none
  app.add_option("--system", cmd.system, "the row to invert with (`--list` shows them; default: the strongest attack)");
  app.add_flag("--list", cmd.list, "print the rows this run can invert with, and exit");
  app.add_option("--imported", cmd.imported,
                 "a `daei import vec2text` folder: invert with its models alone (no trained run needed); rows "
                 "imported-inverter and, with a corrector, imported-vec2text (the default)");
  app.add_option("--dump-logits", cmd.dump_logits,
                 "write the first correction round's corrector inputs (target, hypothesis_embedding, hypothesis_ids, "
                 "input) and its first-step logits to this safetensors file");
}

void validate(Context&, const InvertCommand& cmd) {
  if (cmd.list) return;
  if (cmd.files.input.empty()) throw UsageError("invert: --input is required (or --list)");
  DAEI_CHECK(file_exists(cmd.files.input), "invert: {}: no such file", cmd.files.input);
  if (!cmd.imported.empty())
    DAEI_CHECK(file_exists(cmd.imported + "/inverter/inverter.json"),
               "invert: --imported {}: not a folder written by `daei import vec2text` (no inverter/inverter.json)",
               cmd.imported);
}

// The first correction round's corrector calls, gathered for --dump-logits.
struct LogitsDump {
  std::vector<at::Tensor> target, hyp_e, hyp_ids, logits, input;
  void add(const CorrectorCall& call) {
    if (call.round != 1) return;
    target.push_back(call.target.cpu());
    hyp_e.push_back(call.hyp_e.cpu());
    hyp_ids.push_back(call.hyp_ids.cpu());
    logits.push_back(call.corrector->first_step_logits(call.target, call.hyp_e, call.hyp_ids).cpu());
    input.push_back(torch::tensor(call.inputs, torch::kLong));
  }
  void write(const std::string& path) const {
    DAEI_CHECK(!logits.empty(), "invert: --dump-logits {}: the chosen row ran no correction round", path);
    int64_t L = 0;
    for (const auto& t : hyp_ids) L = std::max<int64_t>(L, t.size(1));
    std::vector<at::Tensor> ids;  // batches padded to one width (pad 0: masked, as in the batch)
    for (const auto& t : hyp_ids) ids.push_back(torch::constant_pad_nd(t, {0, L - t.size(1)}, 0));
    save_safetensors(path, {{"target", torch::cat(target)}, {"hypothesis_embedding", torch::cat(hyp_e)},
                            {"hypothesis_ids", torch::cat(ids)}, {"logits", torch::cat(logits)},
                            {"input", torch::cat(input)}},
                     {{"format", "pt"}});
    LOG_INFO("[invert] first-step logits of {} corrector rows written to {}", torch::cat(input).size(0), path);
  }
};

// The context of --imported DIR: the folder's tokenizer (its spiece.model, else the run's inverter.tokenizer).
EvalContext imported_context(Context& ctx, const std::string& dir, int64_t dim) {
  const Config& cfg = ctx.config;
  EvalContext ec(ctx.release());
  std::string tok = dir + "/inverter/spiece.model";
  if (!file_exists(tok)) tok = RunLayout(ctx.run_dir).tokenizer_for(cfg.str("inverter.tokenizer"));
  DAEI_CHECK(file_exists(tok), "invert: --imported {}: no tokenizer ({}/inverter/spiece.model, or inverter.tokenizer: "
             "{} missing); set inverter.tokenizer to the models' spiece.model (t5-base's for vec2text's GTR models)",
             dir, dir, tok);
  ec.tok = std::make_shared<SpmTokenizer>(tok);
  ec.max_length_eval = InverterOptions::from_config(cfg).max_length_eval;
  ec.batch_size = cfg.integer("eval.batch_size");
  ec.decoding = eval_decoding(cfg);
  std::shared_ptr<NoisyEmbedder> embedder;  // opened only when a corrector needs the black box
  add_imported_systems(cfg, ec, dir, dim, "invert --imported", [&] {
    if (!embedder) embedder = ctx.release().embedder();
    return embedder;
  });
  return ec;
}

// The row named by --system, or the strongest attack: the last of the DAE chain (not a reference, a no-DAE baseline,
// zsinvert, a bag-of-words row, which answers with words, not a text, or a guided row, which is named explicitly).
const SystemSpec* pick_system(const std::vector<SystemSpec>& systems, const std::string& name) {
  const auto starts = [](const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; };
  const SystemSpec* pick = nullptr;
  for (const auto& s : systems)
    if (name.empty() ? !s.reference && !starts(s.name, "noisy-") && !starts(s.name, "zsinvert") && !starts(s.name, "bow-") &&
                           !starts(s.name, "guided-")
                     : s.name == name)
      pick = &s;
  return pick;
}

int run(Context& ctx, const InvertCommand& cmd) {
  if (!ctx.comm->is_root()) return kExitOk;
  torch::set_num_threads(static_cast<int>(ctx.config.integer("train.threads")));
  at::Tensor y = cmd.list ? at::Tensor() : read_embeddings(cmd.files.input, "invert");
  const bool imported = !cmd.imported.empty();
  // --list --imported has no embeddings: the folder's inverter gives the dimension.
  const int64_t dim = !imported ? 0 : y.defined() ? y.size(1) : InverterImpl::load(cmd.imported + "/inverter")->cfg.dim;
  EvalContext ec = imported ? imported_context(ctx, cmd.imported, dim)
                            : make_eval_context(ctx.config, ctx.run_dir, ctx.release());
  LogitsDump dump;
  if (!cmd.dump_logits.empty()) *ec.observe_corrector = [&dump](const CorrectorCall& c) { dump.add(c); };
  auto systems = available_systems(ec);
  // --imported: the imported chain's last row (imported-vec2text when there is a corrector); pick_system skips
  // references, which the imported rows are (trained on clean embeddings).
  const SystemSpec* strongest = imported ? (systems.empty() ? nullptr : &systems.back()) : pick_system(systems, "");
  if (cmd.list) {
    for (const auto& s : systems)
      std::cout << s.name << (s.reference ? "  (reference, outside the threat model)" : "")
                << (&s == strongest ? "  (default)" : "") << "\n";
    return kExitOk;
  }
  const SystemSpec* best = cmd.system.empty() ? strongest : pick_system(systems, cmd.system);
  const std::string where = imported ? cmd.imported : ctx.run_dir;
  if (!cmd.system.empty() && !best) {
    std::vector<std::string> names;
    for (const auto& s : systems) names.push_back(s.name);
    throw UsageError(fmt::format("invert: --system {} is not trained in {}; it has: {}", cmd.system, where,
                                 fmt::join(names, ", ")));
  }
  DAEI_CHECK(best, "invert: no trained attack in {} (train stage 2 first)", where);
  int64_t d = 0;  // every inverter of a run reads the release's dimension
  for (const auto& inv : {ec.inverter("stage3"), ec.inverter("stage2"), ec.inverter("noisy-inverter"),
                          ec.inverter("clean-inverter"), ec.imported_inv})
    if (inv && !d) d = inv->cfg.dim;
  DAEI_CHECK(y.size(1) == d, "invert: {}: embeddings have dimension {}, the trained attack expects {}", cmd.files.input,
             y.size(1), d);
  EvalSplit sp;
  sp.name = "invert";
  sp.noisy = y;
  sp.clean = y;
  sp.sigma = ctx.release().sigma();  // the σ the release noised them at
  sp.texts.assign(static_cast<size_t>(y.size(0)), "");
  auto run = best->recover(sp);
  if (!cmd.dump_logits.empty()) dump.write(cmd.dump_logits);
  std::string out;
  for (size_t i = 0; i < run.texts.size(); ++i)
    out += nlohmann::json{{"text", run.texts[i]}, {"system", best->name},
                          {"queries", run.queries.empty() ? 0.0 : run.queries[i]}}.dump() + "\n";
  write_recovered("invert", cmd.files, out, run.texts.size(), best->name);
  return kExitOk;
}

DAEI_SUBCOMMAND(SubcommandSpec{{"invert"},
                               "texts recovered from noisy embeddings (JSON lines {\"embedding\": [...]} or .npy) "
                               "with the run's trained attack",
                               bind_options<InvertCommand>(add_flags, run, validate)});

}  // namespace
}  // namespace daei::cli
