#include "eval/evaluate.h"

#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <tuple>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "data/cache.h"
#include "data/eval_split.h"
#include "data/run_layout.h"
#include "eval/clean_cache.h"
#include "dist/communicator.h"
#include "eval/floors.h"
#include "eval/metrics.h"
#include "eval/results_report.h"
#include "eval/systems.h"
#include "model/attack/dae.h"
#include "model/release/release.h"
#include "model/net/generate.h"
#include "stages/recipes/stage2.h"

namespace daei {
namespace fs = std::filesystem;
using json = nlohmann::json;

const std::vector<double>& SystemScores::per_text(const std::string& metric) const {
  if (metric == "bleu") return bleu;
  if (metric == "token_f1") return token_f1;
  if (metric == "content_f1") return content_f1;
  throw Error(fmt::format("no per-text scores for metric '{}'", metric));
}

SystemScores score_system(const EvalSplit& split, const std::vector<std::string>& refs, const SystemRun& run,
                          const CleanEmbedFn& embed_clean, const EvalOptions& opt) {
  DAEI_CHECK(run.texts.size() == refs.size(), "eval: {} recovered texts for {} references", run.texts.size(),
             refs.size());
  SystemScores s;
  s.recovered = run.texts;
  const auto per = metrics::score_all(run.texts, refs);
  s.bleu = per.bleu;
  s.token_f1 = per.token_f1;
  s.content_f1 = per.content_f1;
  std::vector<double> cos;
  {
    torch::NoGradGuard ng;
    auto e = embed_clean(run.texts);
    auto c = torch::cosine_similarity(e.to(torch::kFloat64), split.clean.to(torch::kFloat64), 1).contiguous();
    cos.assign(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  }
  const std::map<std::string, const std::vector<double>*> cols{
      {"bleu", &per.bleu},         {"bleu_sentence", &per.bleu_sentence}, {"token_f1", &per.token_f1},
      {"rouge_l", &per.rouge_l}, {"exact", &per.exact},                 {"cos", &cos},
      {"content_f1", &per.content_f1}, {"content_recall", &per.content_recall}};
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
