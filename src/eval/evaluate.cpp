#include "eval/evaluate.h"

#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <tuple>
#include <nlohmann/json.hpp>

#include "build_info.h"
#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/progress.h"
#include "data/cache.h"
#include "data/run_layout.h"
#include "eval/clean_cache.h"
#include "dist/communicator.h"
#include "eval/dae_table.h"
#include "eval/floors.h"
#include "eval/metrics.h"
#include "eval/per_round.h"
#include "eval/systems.h"
#include "model/attack/dae.h"
#include "model/release/release.h"
#include "model/net/generate.h"
#include "stages/loop/data_source.h"
#include "stages/recipes/stage2.h"

namespace daei {
namespace fs = std::filesystem;
using json = nlohmann::json;

SystemScores score_system(const EvalSplit& split, const std::vector<std::string>& refs, const SystemRun& run,
                          const CleanEmbedFn& embed_clean, const EvalOptions& opt) {
  DAEI_CHECK(run.texts.size() == refs.size(), "eval: {} recovered texts for {} references", run.texts.size(),
             refs.size());
  SystemScores s;
  s.recovered = run.texts;
  const auto per = metrics::score_all(run.texts, refs);
  s.bleu = per.bleu;
  s.token_f1 = per.token_f1;
  std::vector<double> cos;
  {
    torch::NoGradGuard ng;
    auto e = embed_clean(run.texts);
    auto c = torch::cosine_similarity(e.to(torch::kFloat64), split.clean.to(torch::kFloat64), 1).contiguous();
    cos.assign(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  }
  const std::map<std::string, const std::vector<double>*> cols{
      {"bleu", &per.bleu},         {"bleu_sentence", &per.bleu_sentence}, {"token_f1", &per.token_f1},
      {"rouge_l", &per.rouge_l}, {"exact", &per.exact},                 {"cos", &cos}};
  for (const auto& [k, v] : cols) {
    s.mean[k] = metrics::mean(*v);
    auto ci = metrics::bootstrap_ci(*v, static_cast<int>(opt.bootstrap), opt.seed);
    s.ci[k] = {ci.lo, ci.hi};
  }
  s.mean["queries_per_text"] = run.queries.empty() ? 0.0 : metrics::mean(run.queries);
  s.index_queries = run.index_queries;
  const TextShape shape = text_shape(run.texts, refs);
  s.mean["distinct"] = shape.distinct;
  s.mean["top_template"] = shape.top_template;
  s.template_ngram = shape.template_ngram;
  s.mean["loops"] = shape.loops;
  s.mean["artefacts"] = shape.artefacts;
  s.mean["repeat4"] = shape.repeat4;
  return s;
}

int64_t cut_before_embedding(EvalSplit& split, const SpmTokenizer& tok, int64_t max_length, const CleanNoisyFn& query) {
  std::vector<int64_t> rows;
  std::vector<std::string> cut, keys;
  for (std::size_t i = 0; i < split.texts.size(); ++i) {
    // encode(t, max_length) keeps eos inside the limit; a text fits when cutting it drops none of its pieces.
    const auto whole = tok.encode(split.texts[i], std::numeric_limits<int32_t>::max());
    if (static_cast<int64_t>(whole.size()) <= max_length) continue;
    rows.push_back(static_cast<int64_t>(i));
    cut.push_back(tok.decode(tok.encode(split.texts[i], max_length)));
    keys.push_back(fmt::format("eval-cut/{}/{}", split.name, i));
  }
  if (rows.empty()) return 0;
  auto [clean, noisy] = query(cut, keys);
  DAEI_CHECK(clean.size(0) == static_cast<int64_t>(rows.size()) && noisy.sizes() == clean.sizes(),
             "eval: the release answered {} rows for {} cut texts", clean.size(0), rows.size());
  const auto index = torch::tensor(rows, torch::kLong);
  split.clean = split.clean.clone().index_copy_(0, index, clean.to(split.clean.dtype()));
  split.noisy = split.noisy.clone().index_copy_(0, index, noisy.to(split.noisy.dtype()));
  for (std::size_t k = 0; k < rows.size(); ++k) split.texts[static_cast<std::size_t>(rows[k])] = std::move(cut[k]);
  return static_cast<int64_t>(rows.size());
}

namespace {

// The run's release as eval queries it: clean rows from the reference model where the release's answers are noisy.
CleanNoisyFn release_query(const Config& cfg, std::shared_ptr<NoisyEmbedder> emb) {
  std::shared_ptr<Embedder> reference;
  if (clean_rows_from_reference_model(cfg)) reference = make_reference_embedder(cfg);
  return [emb, reference](const std::vector<std::string>& texts, const std::vector<std::string>& keys) {
    if (reference) return std::make_pair(reference->embed(texts), emb->embed(texts, keys));
    return emb->embed_with_clean(texts, keys);
  };
}

// A 2-d tensor of rank 0's, on every rank (shape and dtype travel first).
at::Tensor broadcast_from_root(Communicator& comm, at::Tensor t) {
  auto meta = torch::zeros({3}, torch::kLong);
  if (comm.is_root()) {
    DAEI_ASSERT(t.dim() == 2, "eval: a {}-d answer from the release, expected 2-d", t.dim());
    t = t.contiguous();
    meta = torch::tensor({t.size(0), t.size(1), static_cast<int64_t>(t.scalar_type())}, torch::kLong);
  }
  comm.broadcast(meta, 0);
  if (!comm.is_root())
    t = torch::empty({meta[0].item<int64_t>(), meta[1].item<int64_t>()},
                     static_cast<at::ScalarType>(meta[2].item<int64_t>()));
  comm.broadcast(t, 0);
  return t;
}

// The release queried by rank 0 alone and its answers broadcast: each text is queried once, whatever the world size.
CleanNoisyFn queried_on_root(Communicator& comm, CleanNoisyFn query) {
  if (comm.size() == 1) return query;
  return [&comm, query](const std::vector<std::string>& texts, const std::vector<std::string>& keys) {
    at::Tensor clean, noisy;
    if (comm.is_root()) std::tie(clean, noisy) = query(texts, keys);
    clean = broadcast_from_root(comm, clean);
    noisy = broadcast_from_root(comm, noisy);
    return std::make_pair(clean, noisy);
  };
}

// A --split FILE: its texts queried through the run's release, at the run's σ (embedder.sigma, or a remote release's
// σ̂ from the run's estimate), as every cached split was; by rank 0, the rows broadcast.
EvalSplit embed_file_split(const Config& cfg, const Release& release, const std::string& path, int64_t max_texts,
                           Communicator& comm) {
  DAEI_CHECK(file_exists(path), "eval: --split {}: no such file", path);
  EvalSplit s;
  s.name = fs::path(path).stem().string();
  std::ifstream in(path);
  int64_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = json::parse(line, nullptr, false);
    DAEI_CHECK(!j.is_discarded() && j.is_object() && j.contains("text") && j["text"].is_string(),
               "eval: {}:{}: expected a JSON object with a \"text\" string", path, line_no);
    s.texts.push_back(j["text"].get<std::string>());
    if (max_texts > 0 && static_cast<int64_t>(s.texts.size()) >= max_texts) break;
  }
  DAEI_CHECK(!s.texts.empty(), "eval: {}: no texts", path);
  auto emb = release.embedder();
  std::vector<std::string> keys;
  for (size_t i = 0; i < s.texts.size(); ++i) keys.push_back(fmt::format("eval-file/{}/{}", s.name, i));
  std::tie(s.clean, s.noisy) = queried_on_root(comm, release_query(cfg, emb))(s.texts, keys);
  s.sigma = emb->sigma();
  return s;
}

// The first n texts of a split.
EvalSplit first_texts(const EvalSplit& s, int64_t n) {
  EvalSplit out;
  out.name = s.name;
  out.texts.assign(s.texts.begin(), s.texts.begin() + n);
  out.clean = s.clean.narrow(0, 0, n);
  out.noisy = s.noisy.narrow(0, 0, n);
  out.sigma = s.sigma;
  return out;
}

std::string fmt_ci(double m, const std::pair<double, double>& ci) {
  return fmt::format("{:.3f} [{:.3f}, {:.3f}]", m, ci.first, ci.second);
}

// What the floor rows are and what the shape columns count, with each row's top template (rank 0, one split).
std::string shape_legend(const std::map<std::string, SystemScores>& scores, const std::vector<SystemSpec>& systems) {
  std::string md;
  if (scores.count("floor-constant"))
    md += fmt::format("\nFloors: `floor-constant` returns \"{}\" for every text (the word set of best mean token F1 "
                      "on the attacker's training texts, chosen greedily, never on the evaluated texts); "
                      "`floor-retrieval` returns the training text whose answer from the black box is nearest to y "
                      "(cosine), its index the train cache's {:.0f} answers, the same queries every trained row "
                      "learnt from. A row is a recovery only where it is above both.\n",
                      scores.at("floor-constant").recovered.empty() ? std::string()
                                                                     : scores.at("floor-constant").recovered.front(),
                      scores.count("floor-retrieval") ? scores.at("floor-retrieval").index_queries : 0.0);
  md += "\ndistinct: share of distinct recoveries; top template: share holding the most common word 3-gram that "
        "their own truth lacks; loops: a word or a phrase of up to 8 words immediately repeated; artefacts: a word "
        "followed by a case or spacing variant of itself (\"The the\", \"thethe\"). Top templates: ";
  std::vector<std::string> parts;
  for (const auto& sys : systems)
    if (const auto& s = scores.at(sys.name); !s.template_ngram.empty())
      parts.push_back(fmt::format("{} \"{}\"", sys.name, s.template_ngram));
  md += (parts.empty() ? std::string("none") : fmt::format("{}", fmt::join(parts, "; "))) + ".\n";
  return md;
}

// Every row against both floors, paired on the same texts: the JSON list and the markdown table.
std::pair<json, std::string> floor_verdicts(std::map<std::string, SystemScores>& scores,
                                            const std::vector<SystemSpec>& systems, const EvalOptions& opt) {
  json out = json::array();
  if (!scores.count("floor-retrieval") || !scores.count("floor-constant")) return {out, ""};
  std::string md = "\nAbove the floors (paired bootstrap on the same texts; \"above\" = the token-F1 interval "
                   "against both floors lies above 0):\n\n| system | token F1 − floor-retrieval | BLEU − floor-retrieval "
                   "| token F1 − floor-constant | above both |\n|---|---|---|---|---|\n";
  for (const auto& sys : systems) {
    if (sys.floor) continue;
    auto& a = scores.at(sys.name);
    json j{{"system", sys.name}};
    std::string cells;
    bool above = true, paired = true;
    for (const auto& [floor, metric] : std::vector<std::pair<std::string, std::string>>{
             {"floor-retrieval", "token_f1"}, {"floor-retrieval", "bleu"}, {"floor-constant", "token_f1"}}) {
      const auto& f = scores.at(floor);
      const auto& va = metric == "bleu" ? a.bleu : a.token_f1;
      const auto& vb = metric == "bleu" ? f.bleu : f.token_f1;
      if (va.size() != vb.size()) {  // a row run on the first texts only: not paired
        paired = false;
        break;
      }
      const double diff = metrics::mean(va) - metrics::mean(vb);
      const auto ci = metrics::paired_bootstrap_diff(va, vb, static_cast<int>(opt.bootstrap), opt.seed);
      j[floor + "/" + metric] = {{"diff", diff}, {"ci", {ci.lo, ci.hi}}};
      if (metric == "token_f1") above = above && ci.lo > 0;
      cells += fmt::format(" {:+.4f} [{:+.4f}, {:+.4f}] |", diff, ci.lo, ci.hi);
    }
    if (!paired) continue;
    j["above_both"] = above;
    out.push_back(j);
    md += fmt::format("| {}{} |{} {} |\n", sys.name, sys.reference ? " (reference)" : "", cells,
                      above ? "**yes**" : "no");
  }
  return {out, md};
}

// The tables and files of an evaluation from every system's recoveries (rank 0).
void write_results(const Config& cfg, const EvalContext& ctx, const std::vector<SystemSpec>& systems,
                   const std::vector<EvalSplit>& splits, const std::vector<std::vector<SystemRun>>& runs,
                   const std::vector<std::vector<double>>& seconds, const std::map<std::string, int64_t>& cut_rows,
                   const EvalOptions& opt, const std::string& run_dir, const std::string& command_line,
                   std::chrono::steady_clock::time_point t0) {
  auto embed_clean = [&ctx](const std::vector<std::string>& t) { return ctx.clean_embedder->embed(t); };
  json res;
  res["embedder"] = ctx.embedder_id;
  res["sigma"] = splits.empty() ? 0.0 : splits.front().sigma;
  res["command"] = command_line;
  res["revision"] = DAEI_GIT_REV;
  res["splits"] = json::object();
  res["bleu_convention"] = "vec2text: sacrebleu corpus_bleu on each pair (13a, exp smoothing, effective order off), "
                           "averaged; bleu_sentence = sacrebleu sentence_bleu (effective order on)";
  res["cut_before_embedding"] = cfg.flag("eval.cut_before_embedding");
  std::string md = fmt::format(
      "# daei evaluation: {}\n\n`{}`  \nrevision {} · embedder {} · σ {} · {} bootstrap resamples · references are "
      "the true texts truncated to {} tokens, {} · BLEU in vec2text's convention (sacrebleu per pair, effective order "
      "off: under 4 words scores 0; `bleu_sentence` in results.json has it on)\n",
      fs::path(run_dir).filename().string(), command_line, DAEI_GIT_REV, ctx.embedder_id, res["sigma"].get<double>(),
      opt.bootstrap, ctx.max_length_eval,
      cfg.flag("eval.cut_before_embedding") ? "cut before they are embedded (vec2text's rule)"
                                            : "embedded whole (eval.cut_before_embedding false)");
  json per_round{{"command", command_line}, {"revision", DAEI_GIT_REV}, {"splits", json::object()}};
  std::string samples_md = "# Recovered texts\n\nThe first test texts beside every system's recovery.\n";
  std::string recoveries;  // recoveries.jsonl
  for (size_t si = 0; si < splits.size(); ++si) {
    const EvalSplit& split = splits[si];
    std::vector<std::string> refs = reference_texts(ctx, split.texts);
    std::map<std::string, SystemScores> scores;
    for (size_t i = 0; i < systems.size(); ++i) {
      const auto& sys = systems[i];
      const SystemRun& run = runs[si][i];
      if (run.texts.size() < split.texts.size()) {
        // A system run on the first texts only (zsinvert.max_texts): scored on those, its n in the table.
        const EvalSplit sub = first_texts(split, static_cast<int64_t>(run.texts.size()));
        const std::vector<std::string> sub_refs(refs.begin(), refs.begin() + static_cast<int64_t>(run.texts.size()));
        scores[sys.name] = score_system(sub, sub_refs, run, embed_clean, opt);
      } else {
        scores[sys.name] = score_system(split, refs, run, embed_clean, opt);
      }
      if (!run.round_texts.empty())
        per_round["splits"][split.name][sys.name] = score_rounds(split, refs, run, embed_clean, opt);
      scores[sys.name].reference = sys.reference;
      scores[sys.name].floor = sys.floor;
      LOG_INFO("[eval] {} / {}: BLEU {:.4f} token F1 {:.4f} cos {:.4f} ({:.1f} s)", split.name, sys.name,
               scores[sys.name].mean["bleu"], scores[sys.name].mean["token_f1"], scores[sys.name].mean["cos"],
               seconds[si][i]);
    }
    json js{{"n", static_cast<int64_t>(split.texts.size())}, {"sigma", split.sigma}, {"systems", json::object()}};
    if (cut_rows.count(split.name)) js["cut_before_embedding"] = cut_rows.at(split.name);
    md += fmt::format("\n## {} (n = {})\n\n| system | BLEU | token F1 | ROUGE-L | exact | cos | queries/text | "
                      "distinct | top template | loops ≤ 8 | artefacts | repeats ≥ 4 |\n"
                      "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
                      split.name, split.texts.size());
    for (const auto& sys : systems) {
      const auto& s = scores.at(sys.name);
      json j;
      for (const auto& [k, v] : s.mean) j[k] = v;
      for (const auto& [k, v] : s.ci) j[k + "_ci"] = {v.first, v.second};
      j["reference"] = s.reference;
      j["template_ngram"] = s.template_ngram;
      if (s.floor) j["floor"] = true;
      if (s.index_queries > 0) j["index_queries"] = s.index_queries;
      const int64_t n_sys = static_cast<int64_t>(s.recovered.size());
      if (n_sys < static_cast<int64_t>(split.texts.size())) j["n"] = n_sys;  // run on the first n texts only
      js["systems"][sys.name] = j;
      const std::string subset = n_sys < static_cast<int64_t>(split.texts.size())
                                     ? fmt::format(" (first {} texts)", n_sys) : std::string();
      const std::string queries = s.index_queries > 0
                                      ? fmt::format("{:.1f} + {:.0f} once", s.mean.at("queries_per_text"), s.index_queries)
                                      : fmt::format("{:.1f}", s.mean.at("queries_per_text"));
      md += fmt::format("| {}{}{}{} | {} | {} | {} | {:.3f} | {} | {} | {:.1f} % | {:.1f} % | {:.1f} % | {:.1f} % | "
                        "{:.1f} % |\n",
                        sys.name, s.reference ? " (reference)" : "", s.floor ? " (floor)" : "", subset,
                        fmt_ci(s.mean.at("bleu"), s.ci.at("bleu")), fmt_ci(s.mean.at("token_f1"), s.ci.at("token_f1")),
                        fmt_ci(s.mean.at("rouge_l"), s.ci.at("rouge_l")), s.mean.at("exact"),
                        fmt_ci(s.mean.at("cos"), s.ci.at("cos")), queries, 100.0 * s.mean.at("distinct"),
                        100.0 * s.mean.at("top_template"), 100.0 * s.mean.at("loops"), 100.0 * s.mean.at("artefacts"),
                        100.0 * s.mean.at("repeat4"));
    }
    // Every text's recovery and scores, a line each: what a reader checks a row against, and what pools seeds
    // or bootstraps a ratio of two rows (launch/contextual_replicate_summary.py).
    for (size_t i = 0; i < split.texts.size(); ++i) {
      json line{{"split", split.name}, {"i", static_cast<int64_t>(i)}, {"truth", refs[i]}, {"systems", json::object()}};
      for (const auto& sys : systems) {
        const auto& s = scores.at(sys.name);
        if (i < s.recovered.size())
          line["systems"][sys.name] = {{"text", s.recovered[i]}, {"bleu", s.bleu[i]}, {"token_f1", s.token_f1[i]}};
      }
      recoveries += line.dump() + "\n";
    }
    md += shape_legend(scores, systems);
    const auto above = floor_verdicts(scores, systems, opt);
    js["floor_verdicts"] = above.first;
    md += above.second;
    if (ctx.daei_clean_hypotheses && scores.count("daei"))
      md += "\n`daei` (reference): **outside the threat model** — the paper's protocol (`protocol.clean_hypotheses`): "
            "its corrector was trained on, and corrects with, CLEAN embeddings of its hypotheses, as DAEI's public "
            "stage-4 code does; a noise-adding release never answers so. The other rows query the release.\n";
    if (scores.count("zsinvert") || scores.count("zsinvert-dae"))
      md += "\n`zsinvert`: adversarial decoding (ZSInvert, reference notes §3), no inverter: a generator LM proposes "
            "the top-k next tokens of each beam and " +
            (ctx.zsinvert_naturalness == 0
                 ? std::string("only the black box's cosine to the release ranks them (fresh noise a query; the "
                               "LM's score is not used)")
                 : fmt::format("they are ranked by the black box's cosine to the release (fresh noise a query) plus "
                               "{} × the LM's mean log-probability per token (`zsinvert.naturalness`, ours)",
                               ctx.zsinvert_naturalness)) +
            ", then one paraphrase-refinement round seeded with the best text. "
            "The generator is a small T5 trained as a denoising autoencoder on the attacker's training texts only "
            "(`daei train --stage lm`): \"zero-shot\" here means no training specific to the embedder, not no "
            "training at all. `zsinvert-dae` is our variant, not the paper's: cos(DAE(y), DAE(f̃(x))) with the "
            "stage-1 DAE. Both run on the first `zsinvert.max_texts` texts of each split (their n is in the row).\n";
    // Paired verdicts along the attack's chain, and the attack against the plain baseline.
    // Inverters alone (round 0), each corrected row against its own round 0, and the paper's corrected rows
    // against each other (noisy-vec2text < dae-corrected < daei).
    const std::vector<std::pair<std::string, std::string>> pairs{{"dae-only", "noisy-inverter"},
                                                                 {"dae-only", "wiener-inverter"},
                                                                 {"wiener-inverter", "noisy-inverter"},
                                                                 {"joint-no-corrector", "dae-only"},
                                                                 {"joint-no-corrector", "dae-only-continued"},
                                                                 {"joint-no-corrector", "noisy-inverter"},
                                                                 {"dae-only-continued", "noisy-inverter"},
                                                                 {"dae-only-continued", "dae-only"},
                                                                 {"noisy-vec2text", "noisy-inverter"},
                                                                 {"dae-corrected", "dae-only"},
                                                                 {"daei", "joint-no-corrector"},
                                                                 {"dae-corrected", "noisy-vec2text"},
                                                                 {"daei", "dae-corrected"},
                                                                 {"daei", "dae-corrected-continued"},
                                                                 {"dae-corrected-continued", "dae-only-continued"},
                                                                 {"daei", "noisy-vec2text"},
                                                                 {"daei", "noisy-inverter"},
                                                                 {"clean-to-clean", "daei"},
                                                                 {"clean-to-clean", "noisy-vec2text"},
                                                                 {"clean-to-clean", "dae-only"},
                                                                 {"clean-to-clean-corrected", "clean-to-clean"},
                                                                 {"clean-to-noisy-corrected", "clean-to-noisy"},
                                                                 {"imported-vec2text", "imported-inverter"},
                                                                 {"daei", "imported-vec2text"},
                                                                 {"clean-to-clean-corrected", "daei"},
                                                                 {"zsinvert-dae", "zsinvert"}};
    js["verdicts"] = json::array();
    std::string vmd;
    for (const auto& [a, b] : pairs) {
      if (!scores.count(a) || !scores.count(b)) continue;
      for (const std::string metric : {"bleu", "token_f1"}) {
        const auto& va = metric == "bleu" ? scores[a].bleu : scores[a].token_f1;
        const auto& vb = metric == "bleu" ? scores[b].bleu : scores[b].token_f1;
        if (va.size() != vb.size()) continue;  // paired only on the same texts (a row run on a subset)
        const double diff = metrics::mean(va) - metrics::mean(vb);
        auto ci = metrics::paired_bootstrap_diff(va, vb, static_cast<int>(opt.bootstrap), opt.seed);
        js["verdicts"].push_back({{"a", a}, {"b", b}, {"metric", metric}, {"diff", diff}, {"ci", {ci.lo, ci.hi}}});
        const std::string verdict = ci.lo > 0 ? fmt::format("**{} higher**", a)
                                    : ci.hi < 0 ? fmt::format("**{} higher**", b)
                                                : "not separated (interval contains 0)";
        vmd += fmt::format("| {} − {} | {} | {:+.4f} [{:+.4f}, {:+.4f}] | {} |\n", a, b, metric, diff, ci.lo, ci.hi,
                           verdict);
      }
    }
    if (!vmd.empty())
      md += "\nPaired bootstrap of the difference (same texts):\n\n| pair | metric | diff [95 % CI] | verdict |\n"
            "|---|---|---|---|\n" + vmd;
    res["splits"][split.name] = js;
    if (split.name == "test" || (&split == &splits.front())) {
      samples_md += fmt::format("\n## {}\n", split.name);
      const int64_t k = std::min<int64_t>(opt.samples, static_cast<int64_t>(split.texts.size()));
      for (int64_t i = 0; i < k; ++i) {
        samples_md += fmt::format("\n**{}.** {}\n\n", i + 1, refs[i]);
        for (const auto& sys : systems)
          if (const auto& rec = scores.at(sys.name).recovered; i < static_cast<int64_t>(rec.size()))
            samples_md += fmt::format("- `{}`: {}{}{}\n", sys.name, rec[i], has_short_loop(rec[i]) ? " *(loops)*" : "",
                                      has_penalty_artefact(rec[i]) ? " *(artefact)*" : "");
      }
    }
  }
  // The DAE table (stage 1, and stage 3's DAE beside it when trained).
  if (!cfg.strings("eval.splits").empty() && ctx.dae1) {
    auto table = dae_tables(cfg, ctx, run_dir);
    res["dae"] = table.json_block;
    md += "\n## Denoisers: MSE and cosine to the clean embedding\n\n" + table.markdown;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res["wall_s"] = wall;
  md += fmt::format("\nWall time: {}.\n", Progress::format_duration(wall));
  const std::string out = RunLayout(run_dir).eval_dir();
  make_dirs(out);
  write_file_atomic(out + "/results.json", res.dump(2) + "\n");  // whole: nothing kept from an earlier run
  write_file_atomic(out + "/results.md", md);
  write_file_atomic(out + "/samples.md", samples_md);
  write_file_atomic(out + "/recoveries.jsonl", recoveries);
  if (!per_round["splits"].empty()) {
    per_round["wall_s"] = wall;
    write_per_round(out, per_round);
    LOG_INFO("[eval] wrote {}/per_round.json, per_round.md, per_round.png", out);
  }
  LOG_INFO("[eval] wrote {}/results.json, results.md, samples.md, recoveries.jsonl ({})", out,
           Progress::format_duration(wall));
}

}  // namespace

int run_eval(const Config& cfg, Communicator& comm, const std::string& run_dir, const Release& release,
             const std::vector<std::string>& extra_files, const std::string& command_line) {
  const auto t0 = std::chrono::steady_clock::now();
  EvalOptions opt;
  opt.max_texts = cfg.integer("eval.max_texts");
  opt.batch_size = cfg.integer("eval.batch_size");
  opt.bootstrap = cfg.integer("eval.bootstrap");
  opt.seed = static_cast<uint64_t>(cfg.integer("run.seed"));
  opt.samples = cfg.integer("eval.samples");

  EvalContext ctx = make_eval_context(cfg, run_dir, release, &comm);
  auto systems = available_systems(ctx);
  DAEI_CHECK(!systems.empty(), "eval: no trained system in {} (train stage 2 or a baseline first)", run_dir);
  auto floors = floor_systems(cfg, ctx, run_dir);  // first in every table: what a row must beat
  systems.insert(systems.begin(), floors.begin(), floors.end());
  std::vector<std::string> names;
  for (const auto& s : systems) names.push_back(s.name);
  LOG_INFO("[eval] systems: {} ({} rank{})", fmt::join(names, ", "), comm.size(), comm.size() == 1 ? "" : "s");

  std::vector<EvalSplit> splits;
  for (const auto& sp : cfg.strings("eval.splits")) splits.push_back(open_eval_split(run_dir, sp, opt.max_texts));
  for (const auto& f : extra_files)
    splits.push_back(embed_file_split(cfg, release, f, opt.max_texts, comm));
  // The evaluated text is the text embedded (vec2text truncates before embedding): texts longer than the inverters'
  // max_length_eval pieces are cut and queried again (eval.cut_before_embedding; off: embedded whole, scored cut).
  std::map<std::string, int64_t> cut_rows;
  if (cfg.flag("eval.cut_before_embedding") && !splits.empty()) {
    const auto query = queried_on_root(comm, release_query(cfg, release.embedder()));
    for (auto& split : splits) {
      cut_rows[split.name] = cut_before_embedding(split, *ctx.tok, ctx.max_length_eval, query);
      LOG_INFO("[eval] {}: {} of {} texts longer than {} pieces, cut and embedded again", split.name,
               cut_rows[split.name], split.texts.size(), ctx.max_length_eval);
    }
  }

  // Every rank: each system's recoveries, its texts split over the ranks and gathered back in order (systems.h).
  std::vector<std::vector<SystemRun>> runs(splits.size());
  std::vector<std::vector<double>> seconds(splits.size());
  for (size_t k = 0; k < splits.size(); ++k)
    for (const auto& sys : systems) {
      const auto ts = std::chrono::steady_clock::now();
      runs[k].push_back(sys.recover(splits[k]));
      seconds[k].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count());
      LOG_INFO("[eval] {} / {}: {} texts recovered ({:.1f} s)", splits[k].name, sys.name, runs[k].back().texts.size(),
               seconds[k].back());
    }
  // Rank 0: scores, intervals, verdicts and the files (an error there fails every rank).
  comm.run_on_root([&] {
    write_results(cfg, ctx, systems, splits, runs, seconds, cut_rows, opt, run_dir, command_line, t0);
  });
  return kExitOk;
}

}  // namespace daei
