// The tables and files of an evaluation (results_report.h): each split's scores, table, floors and verdicts.
#include "eval/results_report.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "build_info.h"
#include "core/config.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/progress.h"
#include "data/run_layout.h"
#include "eval/metrics.h"
#include "eval/per_round.h"
#include "eval/systems.h"
#include "model/release/embedder.h"

namespace daei {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

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

// The truth's content words that a recovery holds, in bold ("**river** **france**"), or "none".
std::string recovered_content(const std::string& recovery, const std::vector<std::string>& truth_words) {
  std::vector<std::string> both;
  const auto mine = metrics::content_words(recovery);
  std::set_intersection(mine.begin(), mine.end(), truth_words.begin(), truth_words.end(), std::back_inserter(both));
  if (both.empty()) return "none";
  std::string out;
  for (const auto& w : both) out += (out.empty() ? "**" : " **") + w + "**";
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
  std::string md = "\nAbove the floors (paired bootstrap on the same texts; \"above\" = the interval of the "
                   "difference against both floors lies above 0, on token F1 and, separately, on content F1):\n\n"
                   "| system | token F1 − floor-retrieval | content F1 − floor-retrieval | BLEU − floor-retrieval | "
                   "token F1 − floor-constant | content F1 − floor-constant | above both (token F1) | above both "
                   "(content F1) |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& sys : systems) {
    if (sys.floor) continue;
    auto& a = scores.at(sys.name);
    json j{{"system", sys.name}};
    std::string cells;
    bool above = true, above_content = true, paired = true;
    for (const auto& [floor, metric] : std::vector<std::pair<std::string, std::string>>{
             {"floor-retrieval", "token_f1"}, {"floor-retrieval", "content_f1"}, {"floor-retrieval", "bleu"},
             {"floor-constant", "token_f1"}, {"floor-constant", "content_f1"}}) {
      const auto& va = a.per_text(metric);
      const auto& vb = scores.at(floor).per_text(metric);
      if (va.size() != vb.size()) {  // a row run on the first texts only: not paired
        paired = false;
        break;
      }
      const double diff = metrics::mean(va) - metrics::mean(vb);
      const auto ci = metrics::paired_bootstrap_diff(va, vb, static_cast<int>(opt.bootstrap), opt.seed);
      j[floor + "/" + metric] = {{"diff", diff}, {"ci", {ci.lo, ci.hi}}};
      if (metric == "token_f1") above = above && ci.lo > 0;
      if (metric == "content_f1") above_content = above_content && ci.lo > 0;
      cells += fmt::format(" {:+.4f} [{:+.4f}, {:+.4f}] |", diff, ci.lo, ci.hi);
    }
    if (!paired) continue;
    j["above_both"] = above;
    j["above_both_content"] = above_content;
    out.push_back(j);
    md += fmt::format("| {}{} |{} {} | {} |\n", sys.name, sys.reference ? " (reference)" : "", cells,
                      above ? "**yes**" : "no", above_content ? "**yes**" : "no");
  }
  return {out, md};
}

// The paired verdicts along the attack's chain, and the attack against the plain baseline: inverters alone (round
// 0), each corrected row against its own round 0, and the paper's corrected rows against each other
// (noisy-vec2text < dae-corrected < daei).
const std::vector<std::pair<std::string, std::string>> kVerdictPairs{{"dae-only", "noisy-inverter"},
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

using Scores = std::map<std::string, SystemScores>;

// The files of an evaluation, filled a split at a time (rank 0).
struct ResultsReport {
  const Config& cfg;
  const EvalContext& ctx;
  const std::vector<SystemSpec>& systems;
  const EvalOptions& opt;
  json res;                // results.json
  std::string md;          // results.md
  json per_round;          // per_round.json: the systems that recorded their correction rounds
  std::string samples_md;  // samples.md
  std::string recoveries;  // recoveries.jsonl

  // The opening of every file: the command, the revision, the embedder, σ and the scoring conventions.
  void open(const std::vector<EvalSplit>& splits, const std::string& run_dir, const std::string& command_line) {
    res["embedder"] = ctx.embedder_id;
    res["sigma"] = splits.empty() ? 0.0 : splits.front().sigma;
    res["command"] = command_line;
    res["revision"] = DAEI_GIT_REV;
    res["splits"] = json::object();
    res["bleu_convention"] = "vec2text: sacrebleu corpus_bleu on each pair (13a, exp smoothing, effective order off), "
                             "averaged; bleu_sentence = sacrebleu sentence_bleu (effective order on)";
    res["cut_before_embedding"] = cfg.flag("eval.cut_before_embedding");
    md = fmt::format(
        "# daei evaluation: {}\n\n`{}`  \nrevision {} · embedder {} · σ {} · {} bootstrap resamples · references are "
        "the true texts truncated to {} tokens, {} · BLEU in vec2text's convention (sacrebleu per pair, effective "
        "order off: under 4 words scores 0; `bleu_sentence` in results.json has it on)\n",
        fs::path(run_dir).filename().string(), command_line, DAEI_GIT_REV, ctx.embedder_id, res["sigma"].get<double>(),
        opt.bootstrap, ctx.max_length_eval,
        cfg.flag("eval.cut_before_embedding") ? "cut before they are embedded (vec2text's rule)"
                                              : "embedded whole (eval.cut_before_embedding false)");
    per_round = json{{"command", command_line}, {"revision", DAEI_GIT_REV}, {"splits", json::object()}};
    samples_md = "# Recovered texts\n\nThe first test texts beside every system's recovery; after each recovery, the "
                 "truth's content words it holds (stop words and punctuation removed, case ignored: metrics.h).\n";
  }

  // Every system of a split scored (a log line each), and its correction rounds where it recorded them.
  Scores score_split(const EvalSplit& split, const std::vector<std::string>& refs, const std::vector<SystemRun>& runs,
                     const std::vector<double>& seconds) {
    auto embed_clean = [this](const std::vector<std::string>& t) { return ctx.clean_embedder->embed(t); };
    Scores scores;
    for (size_t i = 0; i < systems.size(); ++i) {
      const auto& sys = systems[i];
      const SystemRun& run = runs[i];
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
      LOG_INFO("[eval] {} / {}: BLEU {:.4f} token F1 {:.4f} content F1 {:.4f} cos {:.4f} ({:.1f} s)", split.name,
               sys.name, scores[sys.name].mean["bleu"], scores[sys.name].mean["token_f1"],
               scores[sys.name].mean["content_f1"], scores[sys.name].mean["cos"], seconds[i]);
    }
    return scores;
  }

  // The split's table, a row a system, into results.md; each row's means and intervals into js["systems"].
  void system_table(const EvalSplit& split, const Scores& scores, json& js) {
    md += fmt::format("\n## {} (n = {})\n\n| system | BLEU | token F1 | content F1 | content recall | ROUGE-L | exact | "
                      "cos | queries/text | distinct | top template | loops ≤ 8 | artefacts | repeats ≥ 4 |\n"
                      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
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
      md += fmt::format("| {}{}{}{} | {} | {} | {} | {:.3f} | {} | {:.3f} | {} | {} | {:.1f} % | {:.1f} % | "
                        "{:.1f} % | {:.1f} % | {:.1f} % |\n",
                        sys.name, s.reference ? " (reference)" : "", s.floor ? " (floor)" : "", subset,
                        fmt_ci(s.mean.at("bleu"), s.ci.at("bleu")), fmt_ci(s.mean.at("token_f1"), s.ci.at("token_f1")),
                        fmt_ci(s.mean.at("content_f1"), s.ci.at("content_f1")), s.mean.at("content_recall"),
                        fmt_ci(s.mean.at("rouge_l"), s.ci.at("rouge_l")), s.mean.at("exact"),
                        fmt_ci(s.mean.at("cos"), s.ci.at("cos")), queries, 100.0 * s.mean.at("distinct"),
                        100.0 * s.mean.at("top_template"), 100.0 * s.mean.at("loops"), 100.0 * s.mean.at("artefacts"),
                        100.0 * s.mean.at("repeat4"));
    }
  }

  // Every text's recovery and scores, a line each: what a reader checks a row against, and what pools seeds or
  // bootstraps a ratio of two rows (studies/contextual_replicate/summary.py).
  void add_recoveries(const EvalSplit& split, const std::vector<std::string>& refs, const Scores& scores) {
    for (size_t i = 0; i < split.texts.size(); ++i) {
      json line{{"split", split.name}, {"i", static_cast<int64_t>(i)}, {"truth", refs[i]}, {"systems", json::object()}};
      for (const auto& sys : systems) {
        const auto& s = scores.at(sys.name);
        if (i < s.recovered.size())
          line["systems"][sys.name] = {{"text", s.recovered[i]},
                                       {"bleu", s.bleu[i]},
                                       {"token_f1", s.token_f1[i]},
                                       {"content_f1", s.content_f1[i]}};
      }
      recoveries += line.dump() + "\n";
    }
  }

  // What the daei and zsinvert rows are, under the table where they appear.
  std::string row_notes(const Scores& scores) const {
    std::string notes;
    if (ctx.daei_clean_hypotheses && scores.count("daei"))
      notes += "\n`daei` (reference): **outside the threat model** — the paper's protocol "
               "(`protocol.clean_hypotheses`): its corrector was trained on, and corrects with, CLEAN embeddings of "
               "its hypotheses, as DAEI's public stage-4 code does; a noise-adding release never answers so. The "
               "other rows query the release.\n";
    if (scores.count("zsinvert") || scores.count("zsinvert-dae"))
      notes += "\n`zsinvert`: adversarial decoding (ZSInvert, reference notes §3), no inverter: a generator LM proposes "
               "the top-k next tokens of each beam and " +
               (ctx.zsinvert_naturalness == 0
                    ? std::string("only the black box's cosine to the release ranks them (fresh noise a query; the "
                                  "LM's score is not used)")
                    : fmt::format("they are ranked by the black box's cosine to the release (fresh noise a query) "
                                  "plus {} × the LM's mean log-probability per token (`zsinvert.naturalness`, ours)",
                                  ctx.zsinvert_naturalness)) +
               ", then one paraphrase-refinement round seeded with the best text. "
               "The generator is a small T5 trained as a denoising autoencoder on the attacker's training texts only "
               "(`daei train --stage lm`): \"zero-shot\" here means no training specific to the embedder, not no "
               "training at all. `zsinvert-dae` is our variant, not the paper's: cos(DAE(y), DAE(f̃(x))) with the "
               "stage-1 DAE. Both run on the first `zsinvert.max_texts` texts of each split (their n is in the row).\n";
    return notes;
  }

  // The paired bootstrap of each pair of kVerdictPairs present on the same texts: into js["verdicts"] and results.md.
  void paired_verdicts(const Scores& scores, json& js) {
    js["verdicts"] = json::array();
    std::string vmd;
    for (const auto& [a, b] : kVerdictPairs) {
      if (!scores.count(a) || !scores.count(b)) continue;
      for (const std::string metric : {"bleu", "token_f1", "content_f1"}) {
        const auto& va = scores.at(a).per_text(metric);
        const auto& vb = scores.at(b).per_text(metric);
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
  }

  // The first opt.samples texts of the split beside every system's recovery, into samples.md.
  void add_samples(const EvalSplit& split, const std::vector<std::string>& refs, const Scores& scores) {
    samples_md += fmt::format("\n## {}\n", split.name);
    const int64_t k = std::min<int64_t>(opt.samples, static_cast<int64_t>(split.texts.size()));
    for (int64_t i = 0; i < k; ++i) {
      const auto truth_words = metrics::content_words(refs[i]);
      samples_md += fmt::format("\n**{}.** {}  \ncontent words: {}\n\n", i + 1, refs[i],
                                truth_words.empty() ? std::string("none") : fmt::format("{}", fmt::join(truth_words, " ")));
      for (const auto& sys : systems)
        if (const auto& rec = scores.at(sys.name).recovered; i < static_cast<int64_t>(rec.size()))
          samples_md += fmt::format("- `{}`: {}{}{} — recovered: {}\n", sys.name, rec[i],
                                    has_short_loop(rec[i]) ? " *(loops)*" : "",
                                    has_penalty_artefact(rec[i]) ? " *(artefact)*" : "",
                                    recovered_content(rec[i], truth_words));
    }
  }

  // One split: its scores, table, recoveries, floors, notes, verdicts and (with_samples) its samples.
  void add_split(const EvalSplit& split, const std::vector<SystemRun>& runs, const std::vector<double>& seconds,
                 const std::map<std::string, int64_t>& cut_rows, bool with_samples) {
    const std::vector<std::string> refs = reference_texts(ctx, split.texts);
    Scores scores = score_split(split, refs, runs, seconds);
    json js{{"n", static_cast<int64_t>(split.texts.size())}, {"sigma", split.sigma}, {"systems", json::object()}};
    if (cut_rows.count(split.name)) js["cut_before_embedding"] = cut_rows.at(split.name);
    system_table(split, scores, js);
    add_recoveries(split, refs, scores);
    md += shape_legend(scores, systems);
    const auto above = floor_verdicts(scores, systems, opt);
    js["floor_verdicts"] = above.first;
    md += above.second;
    md += row_notes(scores);
    paired_verdicts(scores, js);
    res["splits"][split.name] = js;
    if (with_samples) add_samples(split, refs, scores);
  }

  // The DAE table, the wall time, and the files (each written whole: nothing kept from an earlier run).
  void write(const std::string& run_dir, std::chrono::steady_clock::time_point t0) {
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
    write_file_atomic(out + "/results.json", res.dump(2) + "\n");
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
};

}  // namespace

void write_results(const Config& cfg, const EvalContext& ctx, const std::vector<SystemSpec>& systems,
                   const std::vector<EvalSplit>& splits, const std::vector<std::vector<SystemRun>>& runs,
                   const std::vector<std::vector<double>>& seconds, const std::map<std::string, int64_t>& cut_rows,
                   const EvalOptions& opt, const std::string& run_dir, const std::string& command_line,
                   std::chrono::steady_clock::time_point t0) {
  ResultsReport report{cfg, ctx, systems, opt, {}, {}, {}, {}, {}};
  report.open(splits, run_dir, command_line);
  for (size_t si = 0; si < splits.size(); ++si)  // samples: the test split's, and the first split's
    report.add_split(splits[si], runs[si], seconds[si], cut_rows, splits[si].name == "test" || si == 0);
  report.write(run_dir, t0);
}

}  // namespace daei
