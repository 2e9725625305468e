// daei train --stage S [--resume] [--force]: one training stage.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <functional>
#include <map>

#include "cli/app.h"
#include "cli/commands.h"
#include "core/dir_lock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/fsutil.h"
#include "data/run_layout.h"
#include "eval/metrics.h"
#include "eval/reference.h"
#include "model/release/release.h"
#include "stages/loop/data_source.h"
#include "stages/recipes/bow.h"
#include "stages/recipes/guided.h"
#include "stages/recipes/stage1.h"
#include "stages/recipes/stage2.h"
#include "stages/recipes/stage3.h"
#include "stages/recipes/catalogue.h"
#include "stages/recipes/stage4.h"
#include "stages/recipes/wiener.h"
#include "stages/recipes/lm.h"
#include "stages/recipes/pretrain.h"
#include "stages/recipes/sentence_embedder.h"
#include "data/cache.h"
#include "stages/loop/trainer.h"

namespace daei::cli {
namespace {

// A split's noisy rows at the σ of the run's release.
std::shared_ptr<const NoisyDataset> noisy_split(Context& ctx, const std::string& split) {
  return open_noisy_split(ctx.config, ctx.run_dir, split, ctx.release());
}

int train_stage1(Context& ctx, const TrainCommand& cmd, const std::string& stage_dir) {
  auto train = noisy_split(ctx, "train");
  std::shared_ptr<const NoisyDataset> val;
  if (ctx.config.integer("stage1.eval_every") > 0) val = noisy_split(ctx, "val");
  Stage1 s(ctx.config, *ctx.comm, stage_dir, train, val, cmd.resume, cmd.force);
  return s.run();
}

// The rows of the held-out CE: the val split, when its cache exists (or the synthetic set stands in).
std::shared_ptr<const NoisyDataset> heldout_split(Context& ctx) {
  if (ctx.config.integer("train.synthetic_rows") == 0 && !RunLayout(ctx.run_dir).cache_complete("val")) {
    LOG_WARN("[train] no {}: no held-out CE", RunLayout(ctx.run_dir).cache("val"));
    return nullptr;
  }
  return noisy_split(ctx, "val");
}

int train_inverter(Context& ctx, const TrainCommand& cmd, const std::string& tag, const std::string& stage_dir, InverterTrainData data,
                   const std::function<InverterTrainData()>& val, InverterBudget budget = {}) {
  auto train = noisy_split(ctx, "train");
  auto tok = run_tokenizer(ctx.config, *ctx.comm, ctx.run_dir, *train);
  budget.pretrained_dir = pretrained_t5_dir(ctx.config, ctx.run_dir);
  // Not over a pretrained T5 (inverter.t5_dir, the pretrain stage) or inverter.init_from: its embeddings are kept.
  if (ctx.config.flag("inverter.token_init") && ctx.config.str("inverter.t5_dir").empty() &&
      ctx.config.str("inverter.init_from").empty() && budget.pretrained_dir.empty())
    budget.token_box = ctx.release().embedder();
  InverterStage s(ctx.config, *ctx.comm, tag, stage_dir, std::move(data), tok, cmd.resume, cmd.force, budget);
  if (val) s.enable_heldout(ctx.config, *ctx.comm, val());
  return s.run();
}

int train_stage2(Context& ctx, const TrainCommand& cmd, const std::string& stage_dir) {
  const std::string dae = RunLayout(ctx.run_dir).final_dae("stage1");
  auto val = heldout_split(ctx);
  return train_inverter(ctx, cmd, "stage2", stage_dir, denoised_data(noisy_split(ctx, "train"), dae),
                        val ? std::function<InverterTrainData()>([=] { return denoised_data(val, dae); }) : nullptr);
}

// The noisy inverter's budget: stage2.noisy_steps (0: stage 2's plus stage 3's steps, the daei inverter's total, so
// that the headline daei − noisy-vec2text compares equal inverter steps) at stage2.noisy_lr (0: stage2.lr).
InverterBudget noisy_inverter_budget(const Config& cfg) {
  InverterBudget b;
  b.steps = cfg.integer("stage2.noisy_steps");
  if (b.steps == 0) b.steps = cfg.integer("stage2.steps") + cfg.integer("stage3.steps");
  b.lr = cfg.real("stage2.noisy_lr");
  return b;
}

int train_noisy_inverter(Context& ctx, const TrainCommand& cmd, const std::string& stage_dir) {
  auto val = heldout_split(ctx);
  const InverterBudget budget = noisy_inverter_budget(ctx.config);
  LOG_INFO("[noisy-inverter] {} steps at lr {} (stage2.noisy_steps, stage2.noisy_lr)", budget.steps,
           budget.lr > 0 ? budget.lr : ctx.config.real("stage2.lr"));
  return train_inverter(ctx, cmd, "noisy-inverter", stage_dir, noisy_data(noisy_split(ctx, "train")),
                        val ? std::function<InverterTrainData()>([=] { return noisy_data(val); }) : nullptr, budget);
}

// The linear reference (issue 22 item 3): an inverter on W(y), W the Wiener filter from the noisy training rows alone
// (dae.table_wiener_rows of them, at the release's σ). Rank 0 fits it once and saves it beside the stage; every rank
// then trains on the saved file, the one eval applies.
int train_wiener_inverter(Context& ctx, const TrainCommand& cmd, const std::string& stage_dir) {
  auto train = noisy_split(ctx, "train");
  const std::string file = RunLayout(ctx.run_dir).wiener_filter();
  const int64_t cap = ctx.config.integer("dae.table_wiener_rows");  // 0 = all rows
  ctx.comm->run_on_root([&] {
    at::Tensor mean, cov;
    row_moments(*train, cap, mean, cov);
    make_dirs(stage_dir);
    wiener_from_noisy(mean, cov, train->sigma()).save(file, train->sigma());
  });
  const auto filter = LinearEstimator::load(file, train->dim());
  LOG_INFO("[wiener-inverter] noisy-only Wiener filter at σ {} from {} rows: mean gain {:.3f}", train->sigma(),
           cap > 0 ? std::min(cap, train->size()) : train->size(), filter.W.diagonal().mean().item<double>());
  auto val = heldout_split(ctx);
  return train_inverter(ctx, cmd, "wiener-inverter", stage_dir, wiener_data(train, filter),
                        val ? std::function<InverterTrainData()>([=] { return wiener_data(val, filter); }) : nullptr);
}

int train_clean_inverter(Context& ctx, const TrainCommand& cmd, const std::string& stage_dir) {
  const bool val = RunLayout(ctx.run_dir).clean_cache_complete("val");
  Context* c = &ctx;
  return train_inverter(ctx, cmd, "clean-inverter", stage_dir, clean_train_data(ctx.config, ctx.run_dir),
                        val ? std::function<InverterTrainData()>(
                                  [c] { return clean_split_data(c->config, c->run_dir, "val"); })
                            : nullptr);
}

// The control for stage 3's extra steps (issue 21 item 7): the stage-2 inverter trained on for stage 3's steps, batch
// and inverter learning rate on DAE₁(y), with no gradient into the DAE, so "joint − dae-only-continued" measures the
// joint objective and not the extra steps.
int train_stage2_continued(Context& ctx, const TrainCommand& cmd, const std::string& stage_dir) {
  const std::string dae = RunLayout(ctx.run_dir).final_dae("stage1");
  auto train = noisy_split(ctx, "train");
  auto tok = run_tokenizer(ctx.config, *ctx.comm, ctx.run_dir, *train);
  InverterBudget budget;
  budget.section = "stage3";
  budget.lr_key = "stage3.lr_inverter";
  budget.weight_decay_key = "stage3.weight_decay";
  budget.init_dir = RunLayout(ctx.run_dir).final_inverter("stage2");
  InverterStage s(ctx.config, *ctx.comm, "stage2-continued", stage_dir, denoised_data(train, dae), tok, cmd.resume,
                  cmd.force, budget);
  if (auto val = heldout_split(ctx)) s.enable_heldout(ctx.config, *ctx.comm, denoised_data(val, dae));
  return s.run();
}

int train_stage3(Context& ctx, const TrainCommand& cmd, const std::string& stage_dir) {
  auto train = noisy_split(ctx, "train");
  auto tok = run_tokenizer(ctx.config, *ctx.comm, ctx.run_dir, *train);
  const RunLayout layout(ctx.run_dir);
  Stage3 s(ctx.config, *ctx.comm, stage_dir, train, tok, layout.final_dae("stage1"), layout.final_inverter("stage2"),
           cmd.resume, cmd.force);
  const std::string select = ctx.config.str("stage3.select_by");
  DAEI_CHECK(select == "last" || select == "heldout_bleu", "stage3.select_by must be last or heldout_bleu, got '{}'",
             select);
  if (select == "heldout_bleu") s.select_by(metrics::vec2text_bleu);  // the BLEU eval reports (vec2text's)
  s.enable_heldout(ctx.config, *ctx.comm, heldout_split(ctx));
  return s.run();
}

// Stage 4 and the other correctors (dae-corrected, noisy-vec2text; the clean reference): one stage, four chains.
int train_corrector(Context& ctx, const TrainCommand& cmd, const std::string& stage_dir, const CorrectorChain& chain) {
  const std::string R = ctx.run_dir;
  const RunLayout layout(R);
  CorrectorStageData d;
  // The clean reference's targets are the clean rows e (eval/reference.h); the attack's are y.
  auto rows = [&](const std::string& split) {
    return chain.reference ? clean_rows_as_dataset(ctx.config, R, split) : noisy_split(ctx, split);
  };
  d.train = rows("train");
  d.hyps = NoisyCache::open(layout.cache(chain.hyp_split));
  if (layout.cache_complete(chain.hyp_val_split())) {
    d.val = rows("val");
    d.hyps_val = NoisyCache::open(layout.cache(chain.hyp_val_split()));
  }
  d.dae_dir = chain.dae_stage.empty() ? "" : layout.final_dae(chain.dae_stage);
  d.inverter_dir = layout.final_inverter(chain.inverter_stage);
  d.pretrained_dir = pretrained_t5_dir(ctx.config, R);
  auto tok = run_tokenizer(ctx.config, *ctx.comm, R, *d.train);
  Stage4 s(ctx.config, *ctx.comm, chain, stage_dir, std::move(d), tok, cmd.resume, cmd.force);
  return s.run();
}

// zsinvert's generator (issue 23): a T5 denoising autoencoder on the training texts alone (no embeddings read).
LmTrainData lm_texts(std::shared_ptr<const NoisyDataset> split) {
  LmTrainData d;
  d.rows = split->size();
  d.texts = [split](const std::vector<int64_t>& rows) { return split->texts(rows); };
  d.prefetch = [split](const std::vector<int64_t>& rows) { split->prefetch(rows, true); };
  return d;
}

int train_lm(Context& ctx, const TrainCommand& cmd, const std::string& stage_dir) {
  auto train = noisy_split(ctx, "train");
  auto tok = run_tokenizer(ctx.config, *ctx.comm, ctx.run_dir, *train);
  LmStage s(ctx.config, *ctx.comm, stage_dir, lm_texts(train), tok, cmd.resume, cmd.force);
  if (auto val = heldout_split(ctx)) s.enable_heldout(ctx.config, *ctx.comm, lm_texts(val));
  return s.run();
}

// Pretraining (issue 22 item 2): T5 span corruption on the training texts alone; with inverter.token_init its token
// embeddings start as a fresh inverter's would (queries of single pieces, no text of the corpus).
int train_pretrain(Context& ctx, const TrainCommand& cmd, const std::string& stage_dir) {
  auto train = noisy_split(ctx, "train");
  auto tok = run_tokenizer(ctx.config, *ctx.comm, ctx.run_dir, *train);
  std::shared_ptr<const NoisyEmbedder> token_box;
  if (ctx.config.flag("inverter.token_init"))
    token_box = ctx.release().embedder();
  LmStage s(ctx.config, *ctx.comm, stage_dir, lm_texts(train), tok, cmd.resume, cmd.force,
            pretrain_objective(ctx.config, tok->vocab_size(), tok->eos_id()), token_box);
  if (auto val = heldout_split(ctx)) s.enable_heldout(ctx.config, *ctx.comm, lm_texts(val));
  return s.run();
}

// The contextual embedder (a GTR stand-in): the pretrain stage's T5 encoder trained with SimCSE on the training texts
// alone (no embeddings read); its report embeds up to embedder_train.report_texts test texts (the defender's model).
int train_embedder(Context& ctx, const TrainCommand& cmd, const std::string& stage_dir) {
  auto train = noisy_split(ctx, "train");
  auto tok = run_tokenizer(ctx.config, *ctx.comm, ctx.run_dir, *train);
  const RunLayout layout(ctx.run_dir);
  EmbedderStageData d;
  d.train = lm_texts(train);
  if (auto val = heldout_split(ctx)) d.val = lm_texts(val);
  if (ctx.comm->is_root()) d.report_texts = embedder_report_texts(ctx.config, ctx.run_dir);
  d.tokenizer_file = layout.tokenizer_for(ctx.config.str("inverter.tokenizer"));
  d.pretrained_dir = layout.final_module("pretrain", "t5");
  EmbedderStage s(ctx.config, *ctx.comm, stage_dir, std::move(d), tok, cmd.resume, cmd.force);
  return s.run();
}

// The inputs of a bag-of-words or guided stage by its input ("noisy", "dae", "clean"): the training rows and val's.
std::pair<InverterTrainData, InverterTrainData> words_stage_inputs(Context& ctx, const std::string& input) {
  const RunLayout layout(ctx.run_dir);
  if (input == "clean")
    return {clean_train_data(ctx.config, ctx.run_dir), clean_split_data(ctx.config, ctx.run_dir, "val")};
  auto val = noisy_split(ctx, "val");
  if (input == "dae") {
    const std::string dae = layout.final_dae("stage1");
    return {denoised_data(noisy_split(ctx, "train"), dae), denoised_data(val, dae)};
  }
  return {noisy_data(noisy_split(ctx, "train")), noisy_data(val)};
}

// The bag-of-words inverters (stages/recipes/bow.h): y, DAE₁(y) or (reference) clean inputs; k is chosen on val rows
// prepared the same way, so val's cache must exist.
int train_bow(Context& ctx, const TrainCommand& cmd, const std::string& stage_dir, const std::string& tag) {
  DAEI_CHECK(heldout_split(ctx), "train --stage {} chooses its k on the val split: {} is missing", tag,
             RunLayout(ctx.run_dir).cache("val"));
  auto [data, held] = words_stage_inputs(ctx, tag.substr(std::string("bow-").size()));
  BowStage s(ctx.config, *ctx.comm, tag, stage_dir, std::move(data), std::move(held), cmd.resume, cmd.force);
  return s.run();
}

// The guided inverters (stages/recipes/guided.h): the fold models' guides on the training rows, the bow stage's own
// model's on val; stage 2's budget, a fresh inverter as stage 2's.
int train_guided(Context& ctx, const TrainCommand& cmd, const std::string& stage_dir, const std::string& input) {
  const RunLayout layout(ctx.run_dir);
  const std::string tag = "guided-" + input, bow_stage = "bow-" + input;
  DAEI_CHECK(heldout_split(ctx), "train --stage {} chooses its fold models' answers on the val split: {} is missing",
             tag, layout.cache("val"));
  DAEI_CHECK(layout.stage_complete(bow_stage), "train --stage {} is guided by {}'s model: train --stage {} first",
             tag, bow_stage, bow_stage);
  auto [data, val] = words_stage_inputs(ctx, input);
  const GuidedOptions o = GuidedOptions::from_config(ctx.config);
  std::vector<std::string> lines;
  if (const int rc = fold_guidance(ctx.config, *ctx.comm, tag, stage_dir, data, val, cmd.resume, cmd.force, lines))
    return rc;
  auto bow = load_bow_inverter(layout.stage_final(bow_stage) + "/bow").ptr();
  InverterBudget budget;
  budget.guide_words = o.words;
  budget.guide_bow = bow_stage;
  budget.guide_pieces = o.max_pieces;
  budget.guide_copy = o.copy;
  auto held = with_guides(val, bow, o.words);
  return train_inverter(ctx, cmd, tag, stage_dir,
                        with_guides(data, std::make_shared<const std::vector<std::string>>(std::move(lines))),
                        [held] { return held; }, budget);
}

using TrainFunction = std::function<int(Context&, const TrainCommand&, const std::string&)>;

// The train function of each stage of the catalogue (src/stages/recipes/catalogue.h: names, folders, budgets, inputs).
TrainFunction train_function(const StageSpec& s) {
  if (s.chain)
    return [c = s.chain](Context& ctx, const TrainCommand& cmd, const std::string& dir) {
      return train_corrector(ctx, cmd, dir, *c);
    };
  static const std::map<std::string, TrainFunction> f{
      {"1", train_stage1},
      {"2", train_stage2},
      {"3", train_stage3},
      {"stage2-continued", train_stage2_continued},
      {"noisy-inverter", train_noisy_inverter},
      {"clean-inverter", train_clean_inverter},
      {"wiener-inverter", train_wiener_inverter},
      {"lm", train_lm},
      {"pretrain", train_pretrain},
      {"embedder", train_embedder},
      {"bow-noisy", [](Context& c, const TrainCommand& t, const std::string& d) { return train_bow(c, t, d, "bow-noisy"); }},
      {"bow-dae", [](Context& c, const TrainCommand& t, const std::string& d) { return train_bow(c, t, d, "bow-dae"); }},
      {"bow-clean", [](Context& c, const TrainCommand& t, const std::string& d) { return train_bow(c, t, d, "bow-clean"); }},
      {"guided-noisy", [](Context& c, const TrainCommand& t, const std::string& d) { return train_guided(c, t, d, "noisy"); }},
      {"guided-dae", [](Context& c, const TrainCommand& t, const std::string& d) { return train_guided(c, t, d, "dae"); }},
      {"guided-clean", [](Context& c, const TrainCommand& t, const std::string& d) { return train_guided(c, t, d, "clean"); }},
  };
  const auto it = f.find(s.name);
  DAEI_CHECK(it != f.end(), "stage {} is in the stage catalogue but has no train function in src/cli/cmd_train.cpp",
             s.name);
  return it->second;
}

// Rank 0 locks the stage folder and, for a run that will train, refuses to mix with an earlier run's checkpoints
// (without --resume or --force); every rank gets the verdict. Done before config.yaml is written.
DirLock lock_stage(Context& ctx, const TrainCommand& cmd, const std::string& stage_dir, bool will_train) {
  DirLock lock;
  std::string verdict;
  if (ctx.comm->is_root()) {
    try {
      lock = DirLock(stage_dir);
      if (will_train) Trainer::check_earlier_run(stage_dir, cmd.resume, cmd.force);
    } catch (const std::exception& e) {
      verdict = e.what();
      if (verdict.empty()) verdict = "error";
    }
  }
  verdict = ctx.comm->broadcast(verdict, 0);
  if (!verdict.empty()) throw Error(verdict);
  return lock;
}

}  // namespace

namespace {

// With pretrain.enabled, the stages that build a fresh T5 start from the pretrain stage's: it must be complete, and
// cannot be mixed with another start (inverter.t5_dir).
void require_pretrained_start(Context& ctx, const std::string& stage) {
  if (!ctx.config.flag("pretrain.enabled")) return;
  const StageSpec& s = *find_stage(stage);
  const bool fresh_corrector = s.chain && !ctx.config.flag("stage4.warm_start");
  if (!s.fresh_inverter && !fresh_corrector) return;
  const RunLayout layout(ctx.run_dir);
  DAEI_CHECK(layout.stage_complete("pretrain"),
             "train --stage {} starts from the pretrained T5 (pretrain.enabled), and {} is missing or incomplete "
             "(train --stage pretrain first)", stage, layout.stage_final("pretrain"));
}

}  // namespace

// Before anything is written: the stage exists, its batch splits over the ranks, its inputs are complete.
void validate_command(Context& ctx, const TrainCommand& cmd) {
  const StageSpec* found = find_stage(cmd.stage);
  if (!found) {
    std::vector<std::string> names;
    for (const auto& s : stage_catalogue()) names.push_back(s.name);
    std::sort(names.begin(), names.end());
    throw UsageError(fmt::format("train: --stage {} is not one of: {}", cmd.stage, fmt::join(names, ", ")));
  }
  const StageSpec& e = *found;
  train_function(e);  // a catalogue entry without one is refused here, before anything is written
  if (ctx.config.flag("pretrain.enabled") && !ctx.config.str("inverter.t5_dir").empty())
    throw UsageError("pretrain.enabled and inverter.t5_dir both say where the T5 starts: set one of them");
  const std::string init_from = ctx.config.str("inverter.init_from");
  if (ctx.config.flag("pretrain.enabled") && !init_from.empty())
    throw UsageError("pretrain.enabled and inverter.init_from both say where the inverters start: set one of them");
  const int64_t B = ctx.config.integer(e.budget + ".batch_size"), A = ctx.config.integer(e.budget + ".grad_accum");
  const int64_t W = ctx.comm->size();
  if (B % (W * A) != 0)
    throw UsageError(fmt::format("{}.batch_size {} is not a multiple of {} ranks × grad_accum {}", e.budget, B, W, A));
  const RunLayout layout(ctx.run_dir);
  if (layout.stage_complete(e.folder) && !cmd.force) return;  // nothing to do: no inputs needed
  if (e.chain && e.chain->reference) require_clean_corrector_reference(ctx.config, ctx.run_dir);
  for (const auto& need : e.needs)
    DAEI_CHECK(layout.stage_complete(need),
               "train --stage {} starts from {}, which is missing or incomplete (train that stage first)", cmd.stage,
               layout.stage_final(need));
  if (const CorrectorChain* c = e.chain)
    DAEI_CHECK(layout.cache_complete(c->hyp_split),
               "train --stage {} needs {} (run `daei hypotheses --for {}`)", cmd.stage, layout.cache(c->hyp_split),
               c->stage);
  if (cmd.stage == "clean-inverter" || cmd.stage == "bow-clean" || cmd.stage == "guided-clean")
    require_clean_train_reference(ctx.config, ctx.run_dir);
  if (e.fresh_inverter) init_from_folder(ctx.config);  // its shape is checked once the tokenizer is known (stage2.h)
  require_pretrained_start(ctx, cmd.stage);
}

int run_command(Context& ctx, const TrainCommand& cmd) {
  const StageSpec& spec = *find_stage(cmd.stage);  // validate_command refused any other name
  torch::set_num_threads(static_cast<int>(ctx.config.integer("train.threads")));
  const RunLayout layout(ctx.run_dir);
  const std::string stage_dir = layout.stage(spec.folder);
  const bool complete = layout.stage_complete(spec.folder) && !cmd.force;
  // Held until the stage ends (its Trainer shares it): a second trainer is refused before it writes anything.
  DirLock lock = lock_stage(ctx, cmd, stage_dir, !complete);
  ctx.commit_config();
  if (complete) {
    LOG_INFO("[{}] {} is complete; nothing to do (--force trains again, archiving it)", spec.folder,
             layout.stage_final(spec.folder));
    return kExitOk;
  }
  return train_function(spec)(ctx, cmd, stage_dir);
}

namespace {

// `train` and `pretrain` (= `train --stage pretrain`, the pipeline step of issue 22 item 2 under its own name).
SubcommandSpec train_spec(const std::string& name, const std::string& help, void (*add)(CLI::App&, TrainCommand&)) {
  SubcommandSpec s{{name}, help, bind_options<TrainCommand>(add, run_command, validate_command)};
  s.commits_config = true;
  return s;
}

void add_pretrain_flags(CLI::App& app, TrainCommand& o) {
  o.stage = "pretrain";
  add_resume_flags(app, o);
}

DAEI_SUBCOMMAND(train_spec(
    "train",
    "train one stage (1: SURE DAE; 2: inverter on DAE(y); 3: joint SURE + CE with PCGrad; 4: corrector; noisy-inverter, wiener-inverter, "
    "clean-inverter: baselines; dae-corrector, noisy-corrector: the correctors of dae-corrected and noisy-vec2text; "
    "clean-corrector: the clean reference's corrector (reference.corrector); pretrain: a T5 pretrained with span corruption on the "
    "training texts, the start of every inverter when pretrain.enabled; "
    "stage2-continued: stage 2 trained on for stage 3's steps, the control for its extra steps; dae-continued-corrector: "
    "its corrector (the dae-corrected-continued row, dae-corrected at daei's inverter steps); lm: the generator of "
    "zsinvert, trained on texts only; embedder: a contextual sentence embedder (pretrain's T5 encoder, SimCSE on the training texts), "
    "exported as a sentence-transformers directory); bow-noisy, bow-dae, bow-clean: bag-of-words inverters (an MLP to the "
    "training texts' content words) on y, DAE(y) and clean embeddings (reference); guided-noisy, guided-dae, guided-clean: "
    "T5 inverters that also read the matching bow stage's top words (fold models' on the training rows); --resume continues from the newest checkpoint",
    add_flags));

DAEI_SUBCOMMAND(train_spec("pretrain",
                           "pretrain a T5 of the inverters' shape with T5 span corruption on the training texts only "
                           "(no embeddings); with pretrain.enabled every inverter and fresh corrector starts from it "
                           "(= train --stage pretrain)",
                           add_pretrain_flags));

}  // namespace
}  // namespace daei::cli
