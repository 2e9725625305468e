#include "eval/per_round.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "eval/metrics.h"

namespace daei {
namespace fs = std::filesystem;
using json = nlohmann::json;

json score_rounds(const EvalSplit& split, const std::vector<std::string>& refs, const SystemRun& run,
                  const CleanEmbedFn& embed_clean, const EvalOptions& opt) {
  DAEI_CHECK(run.round_texts.size() == run.round_queries.size() && !run.round_texts.empty(),
             "per-round: {} rounds of texts but {} of queries", run.round_texts.size(), run.round_queries.size());
  json out{{"rounds", json::array()}, {"early_stop_round", run.early_stop_round}, {"verdicts", json::array()}};
  std::vector<SystemScores> rounds;
  for (size_t t = 0; t < run.round_texts.size(); ++t) {
    SystemRun r;
    r.texts = run.round_texts[t];
    r.queries = run.round_queries[t];
    rounds.push_back(score_system(split, refs, r, embed_clean, opt));
    const auto& s = rounds.back();
    out["rounds"].push_back({{"round", t},
                             {"bleu", s.mean.at("bleu")},
                             {"bleu_ci", {s.ci.at("bleu").first, s.ci.at("bleu").second}},
                             {"token_f1", s.mean.at("token_f1")},
                             {"token_f1_ci", {s.ci.at("token_f1").first, s.ci.at("token_f1").second}},
                             {"content_f1", s.mean.at("content_f1")},
                             {"content_f1_ci", {s.ci.at("content_f1").first, s.ci.at("content_f1").second}},
                             {"cos", s.mean.at("cos")},
                             {"queries_per_text", s.mean.at("queries_per_text")}});
  }
  // Does correcting help? The last round, and the early-stopped one, against round 0 on the same texts.
  std::vector<std::pair<std::string, size_t>> against{{"last", rounds.size() - 1}};
  if (run.early_stop_round >= 0) against.emplace_back("early_stop", static_cast<size_t>(run.early_stop_round));
  for (const auto& [label, t] : against)
    for (const std::string metric : {"bleu", "token_f1", "content_f1"}) {
      const auto& a = rounds[t].per_text(metric);
      const auto& b = rounds[0].per_text(metric);
      auto ci = metrics::paired_bootstrap_diff(a, b, static_cast<int>(opt.bootstrap), opt.seed);
      out["verdicts"].push_back({{"round", t}, {"which", label}, {"metric", metric},
                                 {"diff", metrics::mean(a) - metrics::mean(b)}, {"ci", {ci.lo, ci.hi}}});
    }
  return out;
}

namespace {
std::string verdict(const json& v) {
  const double lo = v["ci"][0].get<double>(), hi = v["ci"][1].get<double>();
  return lo > 0 ? "**above round 0**" : hi < 0 ? "**below round 0**" : "not separated";
}

void plot(const std::string& out_dir, const json& per_round) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    LOG_WARN("[eval] gnuplot not found (Debian gnuplot-nox): per_round.png not drawn");
    return;
  }
  const std::string tmp = temp_sibling(out_dir + "/per_round");
  fs::create_directories(tmp);
  std::ofstream g(tmp + "/plot.gp");
  g << "set terminal png size 1680,560\nset output '" << tmp << "/per_round.png'\nset multiplot layout 1,4\n"
    << "set termoption noenhanced\nset grid\nset key below\nset xlabel 'correction round'\n";
  std::vector<std::string> files, titles;
  for (const auto& [split, systems] : per_round["splits"].items())
    for (const auto& [system, block] : systems.items()) {
      const std::string f = tmp + "/" + std::to_string(files.size()) + ".dat";
      std::ofstream d(f);
      for (const auto& r : block["rounds"])
        d << r["round"].get<int64_t>() << " " << r["bleu"].get<double>() << " " << r["token_f1"].get<double>() << " "
          << r["queries_per_text"].get<double>() << " " << r.value("content_f1", 0.0) << "\n";
      files.push_back(f);
      titles.push_back(system + " (" + split + ")");
    }
  auto panel = [&](const std::string& title, const std::string& using_cols, const std::string& xlabel) {
    g << "set title '" << title << "'\nset xlabel '" << xlabel << "'\nplot ";
    for (size_t i = 0; i < files.size(); ++i)
      g << (i ? ", " : "") << "'" << files[i] << "' using " << using_cols << " with linespoints lw 2 title '"
        << titles[i] << "'";
    g << "\n";
  };
  panel("BLEU by round", "1:2", "correction round");
  panel("token F1 by round", "1:3", "correction round");
  panel("content F1 by round", "1:5", "correction round");
  panel("token F1 against queries per text", "4:3", "queries per text (cumulative)");
  g << "unset multiplot\n";
  g.close();
  const int rc = std::system(("gnuplot '" + tmp + "/plot.gp' >/dev/null 2>&1").c_str());
  if (rc == 0 && fs::exists(tmp + "/per_round.png")) fs::rename(tmp + "/per_round.png", out_dir + "/per_round.png");
  fs::remove_all(tmp);
  if (rc != 0) LOG_WARN("[eval] gnuplot failed (exit {}): per_round.png not drawn", rc);
}
}  // namespace

std::string write_per_round(const std::string& out_dir, const json& per_round) {
  std::string md = "# Per-round results of the corrected systems\n\nEvery corrected system runs all "
                   "correct.max_steps rounds with early stop off; round 0 is its inverter alone. The main table "
                   "reports the round at which early stop would have ended (marked *). Queries are cumulative per "
                   "text.\n";
  for (const auto& [split, systems] : per_round["splits"].items()) {
    for (const auto& [system, block] : systems.items()) {
      md += fmt::format("\n## {} on {}\n\n| round | BLEU | token F1 | content F1 | cos | queries/text |\n"
                        "|---|---|---|---|---|---|\n",
                        system, split);
      const int64_t es = block["early_stop_round"].get<int64_t>();
      for (const auto& r : block["rounds"]) {
        const int64_t t = r["round"].get<int64_t>();
        // content F1 is absent from a per_round.json written before it existed (NaN in the table then).
        const double nan = std::numeric_limits<double>::quiet_NaN();
        const json no_ci = {nan, nan};
        const json& cci = r.contains("content_f1_ci") ? r["content_f1_ci"] : no_ci;
        md += fmt::format("| {}{} | {:.4f} [{:.4f}, {:.4f}] | {:.4f} [{:.4f}, {:.4f}] | {:.4f} [{:.4f}, {:.4f}] | "
                          "{:.4f} | {:.1f} |\n",
                          t, t == es ? "*" : "", r["bleu"].get<double>(), r["bleu_ci"][0].get<double>(),
                          r["bleu_ci"][1].get<double>(), r["token_f1"].get<double>(),
                          r["token_f1_ci"][0].get<double>(), r["token_f1_ci"][1].get<double>(),
                          r.value("content_f1", nan), cci[0].get<double>(), cci[1].get<double>(),
                          r["cos"].get<double>(), r["queries_per_text"].get<double>());
      }
      md += "\n| against round 0 | metric | diff [95 % CI] | verdict |\n|---|---|---|---|\n";
      for (const auto& v : block["verdicts"])
        md += fmt::format("| round {} ({}) | {} | {:+.4f} [{:+.4f}, {:+.4f}] | {} |\n", v["round"].get<int64_t>(),
                          v["which"].get<std::string>(), v["metric"].get<std::string>(), v["diff"].get<double>(),
                          v["ci"][0].get<double>(), v["ci"][1].get<double>(), verdict(v));
    }
  }
  make_dirs(out_dir);
  write_file_atomic(out_dir + "/per_round.json", per_round.dump(2) + "\n");
  write_file_atomic(out_dir + "/per_round.md", md);
  plot(out_dir, per_round);
  return md;
}

}  // namespace daei
