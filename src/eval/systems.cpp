#include "eval/systems.h"

#include <torch/torch.h>

#include <optional>

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/progress.h"
#include "data/cache.h"
#include "data/run_layout.h"
#include "dist/communicator.h"
#include "dist/share.h"
#include "eval/clean_cache.h"
#include "eval/correction.h"
#include "eval/dae_table.h"
#include "eval/metrics.h"
#include "eval/zsinvert.h"
#include "model/attack/corrector.h"
#include "model/attack/dae.h"
#include "model/release/release.h"
#include "model/net/generate.h"
#include "model/attack/imported_models.h"
#include "stages/loop/data_source.h"
#include "stages/recipes/lm.h"
#include "stages/recipes/stage1.h"
#include "stages/recipes/catalogue.h"
#include "model/attack/bow.h"
#include "stages/recipes/guided.h"
#include "stages/recipes/shared_options.h"
#include "stages/recipes/stage4.h"

namespace daei {

namespace {
// The inverter-only row a corrected row starts from (its round 0).
std::string round0_system(const CorrectorChain& chain) {
  const EvalRowSpec* row = find_eval_row(chain.system);
  DAEI_CHECK(row && !row->round0.empty(), "no eval row corrects with {}'s corrector (catalogue.cpp)", chain.stage);
  return row->round0;
}
std::shared_ptr<InverterImpl> load_inverter_if(const RunLayout& layout, const std::string& stage) {
  if (!layout.stage_complete(stage)) return nullptr;
  return InverterImpl::load(layout.final_inverter(stage));
}
bool decodes_with_inverter(const EvalRowSpec& row) {
  return row.reads != RowReads::corrected && row.reads != RowReads::zsinvert && !row.bow;
}
std::shared_ptr<Dae> load_dae_if(const RunLayout& layout, const std::string& stage) {
  if (!layout.stage_complete(stage)) return nullptr;
  return std::make_shared<Dae>(Dae::load(layout.final_dae(stage)));
}

// The correction loop's options (correct.*): the same for every corrected row.
CorrectionOptions correction_options(const Config& cfg, const EvalContext& c) {
  CorrectionOptions co;
  co.max_steps = cfg.integer("correct.max_steps");
  co.min_gain = cfg.real("correct.min_gain");
  co.embed_chunk = cfg.integer("correct.embed_chunk");
  co.max_length = c.max_length_eval;
  co.gen_batch = c.batch_size;
  co.queries_per_candidate = cfg.integer("correct.queries_per_candidate");
  co.decoding = correct_decoding(cfg);
  return co;
}

// The black box as the attack queries it: fresh noise a query.
QueryFn release_queries(std::shared_ptr<NoisyEmbedder> embedder) {
  return [embedder](const std::vector<std::string>& t, const std::vector<std::string>& k) {
    return embedder->embed(t, k);
  };
}

// A corrected row: `corrector` on top of its round-0 system's texts (memoised, or decoded here by `inv`), correcting
// toward y (toward the clean e when clean_target: the corrected clean-to-clean reference), through `dae` when there
// is one (null: none), querying `query`. `opts` is a copy of the context that shares its models.
std::function<SystemRun(const EvalSplit&)> corrected_row(const EvalContext& opts, const CorrectionOptions& co,
                                                         bool per_round, std::shared_ptr<InverterImpl> inv,
                                                         std::shared_ptr<Dae> dae,
                                                         std::shared_ptr<CorrectorImpl> corrector,
                                                         const std::string& system, const std::string& round0,
                                                         bool clean_target, QueryFn query) {
  return [=](const EvalSplit& sp) {
    const at::Tensor& target = clean_target ? sp.clean : sp.noisy;
    const at::Tensor target_in = dae ? denoise(*dae, target, opts.dae_sigma(sp)) : target;
    // A vec2text corrector reads its hypotheses' generated ids (issue 67): memoised with the texts, or decoded here.
    const bool want_ids = corrector->cfg.hypothesis_ids == HypothesisIds::vec2text;
    const std::string memo = round0 + "/" + sp.name;
    auto it = opts.decoded->find(memo);
    auto it_ids = opts.decoded_ids->find(memo);
    Decoded initial;
    if (it != opts.decoded->end() && (!want_ids || it_ids != opts.decoded_ids->end())) {
      initial.texts = it->second;
      if (want_ids) initial.ids = it_ids->second;
    } else {
      DAEI_CHECK(inv, "{}: no texts of {} to start from and no inverter to decode them", system, round0);
      initial = decode_hypotheses(opts, *inv, target_in, system + " x̂₀");
    }
    if (!want_ids) initial.ids.clear();
    std::vector<std::string> ids;
    for (size_t i = 0; i < sp.texts.size(); ++i) ids.push_back(fmt::format("{}/{}", sp.name, i));
    const double sigma = opts.dae_sigma(sp);
    DenoiseFn den = [dae, sigma](const at::Tensor& y) { return dae ? denoise(*dae, y, sigma) : y; };
    CorrectionOptions run_opt = co;
    if (per_round) run_opt.early_stop = false;  // every round; the early-stopped answer is read off the same run
    run_opt.observe = *opts.observe_corrector;
    auto r = run_correction(target, initial.texts, ids, query, den, *corrector, *opts.tok, run_opt, opts.comm,
                            initial.ids);
    const int64_t t = per_round ? early_stop_round(r.round_mean_cos, co) : r.steps;
    SystemRun run;
    run.texts = r.round_best_text.at(t);
    for (auto q : r.round_queries.at(t)) run.queries.push_back(static_cast<double>(q));
    run.early_stop_round = t;
    if (per_round) {
      run.round_texts = r.round_best_text;
      for (const auto& qs : r.round_queries) run.round_queries.emplace_back(qs.begin(), qs.end());
    }
    LOG_INFO("[eval] {} on {}: {} correction rounds run, answer of round {}, {:.1f} queries per text", system,
             sp.name, r.steps, t, metrics::mean(run.queries));
    return run;
  };
}

// The imported rows (eval.imported, issue 49): a `daei import vec2text` folder's inverter decoding the release
// (imported-inverter) and, when it holds a corrector, that corrector over it with every chain's correction options,
// querying the release (imported-vec2text).
using ReleaseBox = std::function<std::shared_ptr<NoisyEmbedder>()>;

void add_imported_rows(const Config& cfg, EvalContext& c, const ReleaseBox& box) {
  const std::string dir = cfg.str("eval.imported");
  if (dir.empty()) return;
  add_imported_systems(cfg, c, dir, c.clean_embedder->dim(), "eval.imported", box);
}
}  // namespace

void add_imported_systems(const Config& cfg, EvalContext& c, const std::string& dir, int64_t dim,
                          const std::string& key, const std::function<std::shared_ptr<NoisyEmbedder>()>& release) {
  auto m = load_imported_models(dir, dim, *c.tok, key);
  c.imported_inv = m.inverter;
  if (m.corrector)
    c.corrected["imported-vec2text"] =
        corrected_row(c, correction_options(cfg, c), cfg.flag("eval.per_round"), m.inverter, nullptr, m.corrector,
                      "imported-vec2text", "imported-inverter", false, release_queries(release()));
  LOG_INFO("[eval] {} ({}): the imported-inverter row{}", dir, key,
           m.corrector ? " and the imported-vec2text row" : " (no corrector/: no imported-vec2text row)");
}

namespace {

// The tokenizer, the defender's model, the decoding options and every model the run directory holds.
void load_models(const Config& cfg, const RunLayout& layout, EvalContext& c) {
  const std::string tok = layout.tokenizer_for(cfg.str("inverter.tokenizer"));
  DAEI_CHECK(file_exists(tok), "eval: no tokenizer at {} (train stage 2 first)", tok);
  c.tok = std::make_shared<SpmTokenizer>(tok);
  c.clean_embedder = make_reference_embedder(cfg);  // the defender's model (a remote release needs one named)
  c.embedder_id = cfg.str("embedder.kind") == "glove" ? "glove-100d" : c.clean_embedder->id();
  c.max_length_eval = InverterOptions::from_config(cfg).max_length_eval;
  c.batch_size = cfg.integer("eval.batch_size");
  c.decoding = eval_decoding(cfg);
  for (const auto& row : eval_rows()) {
    if (decodes_with_inverter(row) && !row.stage.empty() && !c.inverters.count(row.stage))
      if (auto inv = load_inverter_if(layout, row.stage)) c.inverters[row.stage] = inv;
    if (row.bow && layout.stage_complete(row.stage))
      c.bows[row.stage] = load_bow_inverter(layout.stage_final(row.stage) + "/bow").ptr();
  }
  if (auto w = c.inverter("wiener-inverter"))
    c.wiener = std::make_shared<const LinearEstimator>(LinearEstimator::load(layout.wiener_filter(), w->cfg.dim));
  c.dae1 = load_dae_if(layout, "stage1");
  c.dae3 = load_dae_if(layout, "stage3");
  c.dae_sigma.assumed = cfg.real("stage1.sigma.assumed");
}

// The corrected rows: each chain's corrector on top of its round-0 system, querying the black box (counted).
void add_corrected_rows(const Config& cfg, const RunLayout& layout, EvalContext& c, const ReleaseBox& box) {
  const CorrectionOptions co = correction_options(cfg, c);
  const bool per_round = cfg.flag("eval.per_round");
  for (const auto& chain : corrector_chains()) {
    if (!layout.stage_complete(chain.folder)) continue;
    if (chain.reference && !cfg.flag("reference.corrector")) continue;
    auto inv = c.inverter(chain.inverter_stage);
    auto dae = chain.dae_stage == "stage3" ? c.dae3 : chain.dae_stage == "stage1" ? c.dae1 : nullptr;
    if (!inv || (!chain.dae_stage.empty() && !dae)) continue;
    const QueryFn release = release_queries(box());
    auto corrector = CorrectorImpl::load(layout.final_module(chain.folder, "corrector"));
    const EvalContext opts = c;  // a copy for the closures (shares the models)
    auto make = [&](const std::string& system, const std::string& round0, bool clean_target, QueryFn query) {
      return corrected_row(opts, co, per_round, inv, dae, corrector, system, round0, clean_target, query);
    };
    if (chain.reference) {
      // The clean references with the clean corrector (reference.corrector): clean-to-clean corrects toward e with
      // clean hypothesis embeddings; clean-to-noisy applies the same models to the release, querying it as an
      // attacker would.
      c.corrected["clean-to-clean-corrected"] =
          make("clean-to-clean-corrected", "clean-to-clean", true, clean_hypothesis_query(c.clean_embedder));
      c.corrected["clean-to-noisy-corrected"] = make("clean-to-noisy-corrected", "clean-to-noisy", false, release);
      continue;
    }
    if (chain.system == "daei" && cfg.flag("protocol.clean_hypotheses")) {
      // The paper's protocol: the daei corrector was trained on clean hypothesis embeddings and corrects with them.
      c.daei_clean_hypotheses = true;
      c.corrected["daei"] = make("daei", round0_system(chain), false, clean_hypothesis_query(c.clean_embedder));
      continue;
    }
    c.corrected[chain.system] = make(chain.system, round0_system(chain), false, release);
    // A reference outside the threat model (issue 21 item 5): the daei corrector scoring and correcting with CLEAN
    // embeddings of its hypotheses, as DAEI's public stage-4 code appears to (no noise level reaches its embedder).
    if (chain.system == "daei" && cfg.flag("eval.clean_hypotheses_reference"))
      c.corrected["daei-clean-hyp"] = make("daei-clean-hyp", "joint-no-corrector", false,
                                           clean_hypothesis_query(c.clean_embedder));
  }
}

// ZSInvert (issue 23): the lm stage's generator proposes, the black box's cosine ranks; no inverter. The plain row
// scores cos(f̃(x), y); our variant, zsinvert-dae, cos(DAE₁(f̃(x)), DAE₁(y)) with the stage-1 DAE.
void add_zsinvert_rows(const Config& cfg, const RunLayout& layout, EvalContext& c, const ReleaseBox& box) {
  if (!cfg.flag("zsinvert.enabled")) return;
  if (!layout.stage_complete("lm")) {
    LOG_WARN("[eval] zsinvert.enabled but no {} (`daei train --stage lm`): no zsinvert rows", layout.stage_final("lm"));
    return;
  }
  auto lm = T5ModelImpl::from_pretrained(layout.final_module("lm", "lm"));
  const QueryFn query = release_queries(box());
  const ZsGenerator gen = t5_generator(lm, c.tok, c.max_length_eval);
  const ZsInvertOptions zo = zsinvert_options(cfg);
  const int64_t max_texts = cfg.integer("zsinvert.max_texts");
  c.zsinvert_max_texts = max_texts;
  c.zsinvert_naturalness = zo.naturalness;
  Communicator* comm = c.comm;
  for (const bool shielded : {false, true}) {
    auto dae = shielded ? c.dae1 : nullptr;
    if (shielded && !dae) continue;
    const std::string name = shielded ? "zsinvert-dae" : "zsinvert";
    const DaeSigma dae_sigma = c.dae_sigma;
    c.zsinvert[name] = [=](const EvalSplit& sp) {
      const int64_t n = max_texts > 0 ? std::min<int64_t>(max_texts, sp.noisy.size(0)) : sp.noisy.size(0);
      std::vector<std::string> ids;
      for (int64_t i = 0; i < n; ++i) ids.push_back(fmt::format("{}/{}", sp.name, i));
      const double sigma = dae_sigma(sp);
      DenoiseFn shield = [dae, sigma](const at::Tensor& y) { return dae ? denoise(*dae, y, sigma) : y; };
      auto r = run_zsinvert(sp.noisy.narrow(0, 0, n), ids, query, shield, gen, zo, comm);
      SystemRun run;
      run.texts = r.best_text;
      for (auto q : r.queries_per_text) run.queries.push_back(static_cast<double>(q));
      LOG_INFO("[eval] {} on {}: the first {} of {} texts, attacker's cos {:.4f} (after stage A {:.4f}), {:.1f} "
               "queries per text",
               name, sp.name, n, sp.noisy.size(0), metrics::mean(r.best_cos), metrics::mean(r.stage_a_cos),
               metrics::mean(run.queries));
      return run;
    };
  }
}
}  // namespace

EvalContext::EvalContext(const Release& release) : EvalContext(std::make_shared<const Release>(release)) {}

EvalContext::EvalContext(std::shared_ptr<const Release> release) : release_(std::move(release)) {
  DAEI_ASSERT(release_ != nullptr, "EvalContext built without the run's release");
}

EvalContext make_eval_context(const Config& cfg, const std::string& run_dir, const Release& release,
                              Communicator* comm) {
  EvalContext c(release);
  c.comm = comm;
  const RunLayout layout(run_dir);
  load_models(cfg, layout, c);
  // One query handle for every row of this context, opened at the first row that queries the release.
  std::shared_ptr<NoisyEmbedder> embedder;
  const ReleaseBox box = [&]() {
    if (!embedder) embedder = c.release().embedder();
    return embedder;
  };
  add_corrected_rows(cfg, layout, c, box);
  add_imported_rows(cfg, c, box);
  add_zsinvert_rows(cfg, layout, c, box);
  return c;
}

Communicator& comm_of(const EvalContext& ctx) {
  static LocalCommunicator local;  // stateless
  return ctx.comm ? *ctx.comm : local;
}

at::Tensor denoise(Dae& dae, const at::Tensor& y, double sigma) {
  torch::NoGradGuard ng;
  dae->eval();
  std::vector<at::Tensor> parts;
  for (int64_t i = 0; i < y.size(0); i += 1024) {
    auto b = y.narrow(0, i, std::min<int64_t>(1024, y.size(0) - i));
    parts.push_back(dae->forward(b, torch::full({b.size(0)}, sigma)));
  }
  return torch::cat(parts, 0);
}

std::vector<std::string> decode_texts(const EvalContext& ctx, InverterImpl& inv, const at::Tensor& e,
                                      const std::string& what) {
  return decode_hypotheses(ctx, inv, e, what).texts;
}

Decoded decode_hypotheses(const EvalContext& ctx, InverterImpl& inv, const at::Tensor& e, const std::string& what,
                          const std::vector<std::string>* guides) {
  DAEI_CHECK(!guides || static_cast<int64_t>(guides->size()) == e.size(0), "eval: {} guide lines for {} rows",
             guides ? guides->size() : 0, e.size(0));
  inv.eval();
  GenerateOptions g = ctx.decoding;
  g.max_length = ctx.max_length_eval;
  Communicator& comm = comm_of(ctx);
  const ItemRange mine = block_share(e.size(0), ctx.batch_size, comm);
  std::vector<std::string> out;
  std::vector<int64_t> lengths, flat;  // this rank's id rows, flattened for the gather
  Progress progress("eval", mine.size(), "text", 10.0);
  for (const ItemRange& batch : blocks_of(mine, ctx.batch_size)) {
    InverterGuide guide;
    if (guides) {
      const auto b = ctx.tok->encode_batch({guides->begin() + batch.begin, guides->begin() + batch.end},
                                           inv.cfg.guide_pieces);
      guide = {b.input_ids, b.attention_mask};
    }
    const at::Tensor seqs = inv.generate(e.slice(0, batch.begin, batch.end), g, guides ? &guide : nullptr).cpu();
    for (auto& t : ctx.tok->decode_batch(seqs)) out.push_back(std::move(t));
    for (int64_t i = 0; i < seqs.size(0); ++i) {
      const auto row = generated_row(seqs[i], inv.cfg.t5.pad_token_id);
      lengths.push_back(static_cast<int64_t>(row.size()));
      flat.insert(flat.end(), row.begin(), row.end());
    }
    progress.update(static_cast<int64_t>(out.size()), what);
  }
  Decoded d;
  d.texts = gather_in_order(comm, out);
  const std::vector<int64_t> all_len = gather_in_order(comm, lengths), all_ids = gather_in_order(comm, flat);
  size_t at = 0;
  for (int64_t n : all_len) {
    d.ids.emplace_back(all_ids.begin() + at, all_ids.begin() + at + n);
    at += n;
  }
  return d;
}

std::vector<std::string> reference_texts(const EvalContext& ctx, const std::vector<std::string>& texts) {
  std::vector<std::string> out;
  out.reserve(texts.size());
  for (const auto& t : texts) out.push_back(ctx.tok->decode(ctx.tok->encode(t, ctx.max_length_eval)));
  return out;
}

std::shared_ptr<InverterImpl> EvalContext::inverter(const std::string& folder) const {
  auto it = inverters.find(folder);
  return it == inverters.end() ? nullptr : it->second;
}

namespace {
// The model and input of an inverter row (eval_rows()); a null model when the run lacks the inverter or its DAE.
struct InverterRow {
  std::shared_ptr<InverterImpl> inv;
  std::shared_ptr<Dae> dae;
};
InverterRow inverter_row(const EvalContext& ctx, const EvalRowSpec& row) {
  InverterRow r{row.stage.empty() ? ctx.imported_inv : ctx.inverter(row.stage), nullptr};
  if (row.reads == RowReads::dae_stage1 || row.reads == RowReads::dae_stage3) {
    r.dae = row.reads == RowReads::dae_stage1 ? ctx.dae1 : ctx.dae3;
    if (!r.dae) r.inv = nullptr;
  }
  return r;
}
at::Tensor row_input(const EvalContext& ctx, const EvalRowSpec& row, const InverterRow& r, const EvalSplit& sp) {
  switch (row.reads) {
    case RowReads::clean: return sp.clean;
    case RowReads::wiener: return ctx.wiener->apply(sp.noisy);
    case RowReads::dae_stage1:
    case RowReads::dae_stage3: return denoise(*r.dae, sp.noisy, ctx.dae_sigma(sp));
    default: return sp.noisy;
  }
}
}  // namespace

std::vector<SystemSpec> available_systems(const EvalContext& ctx) {
  std::vector<SystemSpec> s;
  const EvalContext* c = &ctx;
  for (const EvalRowSpec& row : eval_rows()) {
    if (row.reads == RowReads::corrected) {
      // protocol.clean_hypotheses makes the daei row read clean hypothesis embeddings: outside the threat model.
      const bool reference = row.reference || (row.system == "daei" && ctx.daei_clean_hypotheses);
      if (auto it = ctx.corrected.find(row.system); it != ctx.corrected.end())
        s.push_back({row.system, reference, it->second});
      continue;
    }
    if (row.reads == RowReads::zsinvert) {
      if (auto it = ctx.zsinvert.find(row.system); it != ctx.zsinvert.end()) s.push_back({row.system, false, it->second});
      continue;
    }
    if (row.bow) {  // its k words, most probable first; nothing to decode
      auto it = ctx.bows.find(row.stage);
      const std::shared_ptr<Dae> dae = row.reads == RowReads::dae_stage1 ? ctx.dae1 : nullptr;
      if (it == ctx.bows.end() || (row.reads == RowReads::dae_stage1 && !dae)) continue;
      s.push_back({row.system, row.reference, [c, row, bow = it->second, dae](const EvalSplit& sp) {
                     const at::Tensor e = row_input(*c, row, InverterRow{nullptr, dae}, sp);
                     std::vector<std::string> t;
                     for (int64_t i = 0; i < e.size(0); i += 512) {
                       auto part = bow->recover(e.slice(0, i, std::min<int64_t>(e.size(0), i + 512)));
                       t.insert(t.end(), part.begin(), part.end());
                     }
                     return texts_run(std::move(t));
                   }});
      continue;
    }
    const InverterRow r = inverter_row(ctx, row);
    if (!r.inv) continue;
    // A guided inverter reads its bow stage's top words of the same input (stages/recipes/guided.h).
    std::shared_ptr<BowInverterImpl> guide_bow;
    if (r.inv->cfg.guide_words > 0) {
      auto it = ctx.bows.find(r.inv->cfg.guide_bow);
      if (it == ctx.bows.end()) {
        LOG_WARN("[eval] {}: no {}/final/bow to guide it: row left out", row.system, r.inv->cfg.guide_bow);
        continue;
      }
      guide_bow = it->second;
    }
    // Each inverter-only row memoises its texts: its corrected row starts from them instead of decoding again.
    s.push_back({row.system, row.reference, [c, row, r, guide_bow](const EvalSplit& sp) {
                   const at::Tensor e = row_input(*c, row, r, sp);
                   std::vector<std::string> guides;
                   if (guide_bow) guides = guide_lines(*guide_bow, e, r.inv->cfg.guide_words);
                   Decoded d = decode_hypotheses(*c, *r.inv, e, row.system, guide_bow ? &guides : nullptr);
                   (*c->decoded)[row.system + "/" + sp.name] = d.texts;
                   (*c->decoded_ids)[row.system + "/" + sp.name] = std::move(d.ids);
                   return texts_run(std::move(d.texts));
                 }});
  }
  return s;
}

DaeTables dae_tables(const Config& cfg, const EvalContext& ctx, const std::string& run_dir) {
  DaeTables out;
  const RunLayout layout(run_dir);
  DAEI_CHECK(ctx.dae1, "eval: no DAE at {} (run `daei train --stage 1` first)", layout.final_dae("stage1"));
  const double sigma0 = (*ctx.dae1)->sigma0();  // the σ the stage-1 DAE was trained at
  // The training rows at the release's σ (a manifest at another σ is refused, naming it), and DAEs of their width.
  const auto train = open_noisy_split(cfg, run_dir, "train", ctx.release());
  const auto same_width = [&](const std::shared_ptr<Dae>& dae, const std::string& stage, int64_t dim,
                              const std::string& of) {
    if (dae)
      DAEI_CHECK((*dae)->options().dim == dim, "{}/dae.json: a DAE of {}-d embeddings, but {} holds {}-d ones (a DAE "
                 "of another embedder?)", layout.final_dae(stage), (*dae)->options().dim, of, dim);
  };
  same_width(ctx.dae1, "stage1", train->dim(), layout.cache("train"));
  same_width(ctx.dae3, "stage3", train->dim(), layout.cache("train"));
  at::Tensor mean, cov;
  row_moments(*train, cfg.integer("dae.table_wiener_rows"), mean, cov);
  const auto wiener = wiener_from_noisy(mean, cov, sigma0);
  std::map<std::string, EvalSplit> data;
  const bool synthetic = cfg.integer("train.synthetic_rows") > 0;
  for (const std::string split : {"val", "test"}) {
    data[split] = synthetic ? synthetic_from_config(cfg, split) : open_eval_split(run_dir, split);
    same_width(ctx.dae1, "stage1", data[split].noisy.size(1), layout.cache(split));
  }
  // The oracle is fitted on other rows than those scored: the clean training rows when the reference cache exists.
  std::optional<LinearEstimator> oracle_train;
  std::string oracle_from;
  if (layout.clean_cache_complete("train")) {
    auto clean = CleanCache::open(layout.cache("train"), CleanCache::OfflineEvalOnly{});
    const int64_t n = std::min<int64_t>(clean->size(), 200000);
    std::vector<int64_t> rows(n);
    for (int64_t i = 0; i < n; ++i) rows[i] = i;
    oracle_train = wiener_oracle(clean->clean(rows), sigma0);
    oracle_from = fmt::format("the first {} clean training rows", n);
  } else {
    oracle_from = "the other evaluation split (val for test, test for val)";
  }
  std::map<std::string, DaeRow> rows;
  for (const std::string split : {"val", "test"}) {
    const auto& d = data.at(split);
    // A DAE trained at another σ than its data's is refused, unless the config says the attack assumed that σ on
    // purpose (stage1.sigma.assumed: a sensitivity study); the table then uses the assumed σ throughout.
    const bool assumed = std::abs(cfg.real("stage1.sigma.assumed") - sigma0) <= 1e-9 * sigma0;
    DAEI_CHECK(assumed || std::abs(d.sigma - sigma0) <= 1e-9 * sigma0,
               "eval: {}/manifest.json: {} was cached at σ {} but the DAE was trained at {}", layout.cache(split), split,
               d.sigma, sigma0);
    const auto oracle = oracle_train ? *oracle_train
                                     : wiener_oracle(data.at(split == "val" ? "test" : "val").clean, sigma0);
    rows[split] = dae_row(*ctx.dae1, ctx.dae_sigma(d), wiener, oracle, d.clean, d.noisy);
    out.json_block[split] = to_json(rows[split]);
    out.json_block[split]["oracle_fitted_on"] = oracle_from;
    if (ctx.dae3) {
      auto r3 = dae_row(*ctx.dae3, ctx.dae_sigma(d), wiener, oracle, d.clean, d.noisy);
      out.json_block[split]["mse_dae_stage3"] = r3.mse_dae;
      out.json_block[split]["cos_dae_stage3"] = r3.cos_dae;
      out.json_block[split]["mse_reduction_dae_stage3"] = r3.mse_noisy > 0 ? 1.0 - r3.mse_dae / r3.mse_noisy : 0.0;
    }
  }
  out.markdown = "```\n" + format_table(rows, sigma0) + "```\n";
  if (ctx.dae3) {
    out.markdown += "\n| split | stage-1 DAE MSE | stage-3 (joint) DAE MSE | stage-1 cos | stage-3 cos |\n|---|---|---|---|---|\n";
    for (const std::string split : {"val", "test"}) {
      const auto& j = out.json_block[split];
      out.markdown += fmt::format("| {} | {:.5f} | {:.5f} | {:.4f} | {:.4f} |\n", split, j["mse_dae"].get<double>(),
                                  j["mse_dae_stage3"].get<double>(), j["cos_dae"].get<double>(),
                                  j["cos_dae_stage3"].get<double>());
    }
  }
  out.markdown += "\n| split | DAE MSE cut [95 % CI] | noisy-only Wiener cut [95 % CI] | DAE − Wiener [95 % CI] |\n"
                  "|---|---|---|---|\n";
  for (const auto& [split, r] : rows) {
    const double dae_cut = 1.0 - r.mse_dae / r.mse_noisy, w_cut = 1.0 - r.mse_wiener_noisy_only / r.mse_noisy;
    out.markdown += fmt::format("| {} | {:.1f} % [{:.1f}, {:.1f}] | {:.1f} % [{:.1f}, {:.1f}] | {:+.1f} points [{:+.1f}, "
                                "{:+.1f}] |\n", split, 100 * dae_cut, 100 * r.cut_dae_ci.first,
                                100 * r.cut_dae_ci.second, 100 * w_cut, 100 * r.cut_wiener_ci.first,
                                100 * r.cut_wiener_ci.second, 100 * (dae_cut - w_cut),
                                100 * r.cut_dae_minus_wiener_ci.first, 100 * r.cut_dae_minus_wiener_ci.second);
  }
  out.markdown += "\nOracle Wiener filter fitted on " + oracle_from + ".\n";
  if (const int64_t n = cfg.integer("train.synthetic_rows"); n > 0) {
    // Seeded synthetic rows stood in for the caches (a test setting): say so wherever the numbers go.
    out.json_block["synthetic_rows"] = n;
    out.markdown = fmt::format("**Synthetic rows (train.synthetic_rows = {}), not an embedder's cache: these numbers "
                               "test the code and measure no defence.**\n\n", n) + out.markdown;
  }
  return out;
}

}  // namespace daei
