// daei corpus build | cache build | cache verify (issue 4).
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "data/cache.h"
#include "data/corpus.h"
#include "data/run_layout.h"
#include "model/release/release.h"

namespace daei::cli {
namespace fs = std::filesystem;
using nlohmann::json;

int run_command(Context& ctx, const CorpusBuildCommand& cmd) {
  if (ctx.comm->rank() != 0) return kExitOk;  // one writer; other ranks have nothing to do
  const std::string out = RunLayout(ctx.run_dir).corpus_dir();
  const std::string stats_path = RunLayout(ctx.run_dir).corpus_stats();
  // What decides the corpus's content (the sort buffer only changes memory use, not the output).
  YAML::Node content = YAML::Clone(ctx.config.node("corpus"));
  content.remove("sort_buffer_mb");
  const std::string want = YAML::Dump(content);
  if (file_exists(stats_path) && !cmd.force) {
    json old = json::parse(read_file(stats_path));
    DAEI_CHECK(old.value("config", "") == want,
               "{} was built with another corpus config; pass --force to rebuild it (caches built from the old corpus "
               "will then refuse to resume: their corpus SHA-256 differs)", out);
    LOG_INFO("[corpus] {} is up to date (built with the same config); --force rebuilds it", out);
    return kExitOk;
  }
  CorpusStats st = build_corpus(ctx.config, out);
  json j{{"config", want}, {"read", st.read}, {"invalid_utf8", st.invalid_utf8}, {"empty", st.empty},
         {"too_short", st.too_short}, {"too_long", st.too_long}, {"duplicates", st.duplicates},
         {"splits", st.split_rows}, {"seconds", st.seconds}};
  write_file_atomic(stats_path, j.dump(1) + "\n");
  for (auto& [src, n] : st.read) LOG_INFO("[corpus] read {} texts from {}", n, src);
  LOG_INFO("[corpus] dropped: {} invalid UTF-8, {} empty, {} too short, {} too long, {} duplicates", st.invalid_utf8,
           st.empty, st.too_short, st.too_long, st.duplicates);
  for (auto& [split, n] : st.split_rows) LOG_INFO("[corpus] {}/{}.jsonl: {} rows", out, split, n);
  LOG_INFO("[corpus] done in {:.1f} s", st.seconds);
  return kExitOk;
}

int run_command(Context& ctx, const CacheBuildCommand& cmd) {
  auto opt = CacheBuildOptions::from_config(ctx.config, ctx.run_dir, cmd.split);
  opt.clean = cmd.clean;
  // config.yaml is written once build_cache holds the split's lock: a refused build (another one holds it, a bad
  // request) leaves the run's config as it was.
  opt.on_locked = [&ctx] { ctx.commit_config(); };
  const std::string estimate = RunLayout(ctx.run_dir).sigma_estimate();
  if (noise_is_remote(ctx.config) && !file_exists(estimate))
    ctx.comm->run_on_root([&] { write_sigma_estimate(ctx.config, estimate); });  // once per run, every split
  auto emb = ctx.release().embedder();
  // Clean rows from the defender's model when the release is remote (refused without reference.embedder) or
  // reference.embedder names one.
  if (opt.clean && clean_rows_from_reference_model(ctx.config))
    opt.clean_embedder = make_reference_embedder(ctx.config);
  auto r = build_cache(opt, *emb, *ctx.comm);
  if (ctx.comm->rank() == 0 && !r.already_complete && r.seconds > 0)
    LOG_INFO("[cache] {:.0f} rows/s over {} ranks", r.rows_built / r.seconds, ctx.comm->size());
  return kExitOk;
}

namespace {

DAEI_SUBCOMMAND(SubcommandSpec{
    {"corpus", "build"},
    "real text → corpus/{train,val,test,ood-*}.jsonl (dedup, length filter, seeded shuffle; streaming)",
    bind_options<CorpusBuildCommand>(add_flags, run_command)});

SubcommandSpec cache_build_spec() {
  SubcommandSpec s{
      {"cache", "build"},
      "query the noisy embedder for a split's texts and write HDF5 shards (resumable, MPI-parallel)",
      bind_options<CacheBuildCommand>(add_flags, run_command)};
  s.commits_config = true;  // under the split's lock (CacheBuildOptions::on_locked)
  return s;
}

DAEI_SUBCOMMAND(cache_build_spec());

struct CacheVerifyCommand {
  std::string split;
  bool as_json = false, clean = false;
};

int run_cache_verify(Context& ctx, const CacheVerifyCommand& cmd) {
  if (ctx.comm->rank() != 0) return kExitOk;
  auto r = verify_cache(RunLayout(ctx.run_dir).cache(cmd.split), cmd.clean);
  if (cmd.as_json)
    std::cout << json{{"split", cmd.split}, {"kind", cmd.clean ? "clean" : "noisy"}, {"rows", r.rows},
                      {"shards", r.shards}, {"dim", r.dim}, {"dtype", r.dtype}, {"embedder", r.embedder},
                      {"sigma", r.sigma}, {"digest", r.digest}}.dump()
              << "\n";
  else
    std::cout << fmt::format("{}: ok, {} rows, {} shards, dim {}, {}, sigma {}, embedder {}\ndigest {}\n",
                             cmd.split, r.rows, r.shards, r.dim, r.dtype, r.sigma, r.embedder, r.digest);
  return kExitOk;
}

DAEI_SUBCOMMAND(SubcommandSpec{
    {"cache", "verify"},
    "check a cache's checksums and attributes against its manifest; print rows, shards and a content digest",
    bind_options<CacheVerifyCommand>(
        [](CLI::App& a, CacheVerifyCommand& o) {
          a.add_option("--split", o.split, "the split to check")->required();
          a.add_flag("--json", o.as_json, "one JSON line");
          a.add_flag("--clean", o.clean, "check cache/SPLIT/clean instead");
        },
        run_cache_verify)});

}  // namespace
}  // namespace daei::cli
