#include "stages/hypotheses.h"

#include <hdf5.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/sha256.h"
#include "data/cache.h"
#include "data/cache_shard.h"  // the cache's shard writer and HDF5 helpers: hyp-train is written as any cache
#include "dist/communicator.h"
#include "model/dae.h"
#include "model/embedder.h"
#include "model/generate.h"
#include "model/inverter.h"
#include "model/tokenizer_spm.h"

namespace daei {
namespace fs = std::filesystem;
using nlohmann::json;
using namespace cache_detail;

HypothesisCacheOptions HypothesisCacheOptions::from_config(const Config& cfg, const std::string& run_dir,
                                                           const std::string& source_split, const std::string& split) {
  HypothesisCacheOptions o;
  o.train_cache_dir = run_dir + "/cache/" + source_split;
  o.cache_dir = run_dir + "/cache/" + split;
  o.split = split;
  o.shard_rows = cfg.integer("cache.shard_rows");
  // The corrector reads hypotheses of inverter.max_length_eval tokens (training and evaluation alike): decode them
  // at that length. A cache decoded at another length has another source digest and is refused on resume.
  o.max_length = cfg.integer("inverter.max_length_eval");
  o.max_rows = source_split == "train" ? cfg.integer("hypotheses.max_rows") : cfg.integer("train.heldout_rows");
  o.batch_size = cfg.integer("hypotheses.batch_size");
  o.queries_per_text = cfg.integer("hypotheses.queries_per_text");
  o.dtype = cfg.str("cache.dtype");
  return o;
}

std::string hypothesis_query_key(int64_t round, int64_t id, const std::string& text) {
  return "hyp/r" + std::to_string(round) + "/" + std::to_string(id) + "/" + text;
}

namespace {

void hash_module(Sha256& h, const torch::nn::Module& m) {
  for (const auto& p : m.named_parameters(true)) {
    h.update(p.key());
    auto t = p.value().detach().to(torch::kCPU).contiguous();
    h.update(t.data_ptr(), t.numel() * t.element_size());
  }
  for (const auto& b : m.named_buffers(true)) {
    h.update(b.key());
    auto t = b.value().detach().to(torch::kCPU).contiguous();
    h.update(t.data_ptr(), t.numel() * t.element_size());
  }
}

std::string source_digest(const HypothesisCacheOptions& opt, const torch::nn::Module& inverter,
                          const torch::nn::Module* dae) {
  Sha256 h;
  h.update(std::string("daei.hyp-train.v1\n"));
  h.update(read_file(opt.train_cache_dir + "/manifest.json"));
  h.update(fmt::format("\nsigma={:.17g} round={} max_length={}\n", opt.dae_sigma, opt.round, opt.max_length));
  if (opt.queries_per_text != 1) h.update(fmt::format("queries_per_text={}\n", opt.queries_per_text));
  hash_module(h, inverter);
  if (dae)
    hash_module(h, *dae);
  else
    h.update(std::string("no DAE\n"));
  return h.hex();
}

// An existing complete shard: is it the one this build would write? Another build's shard is an error.
bool shard_ok(const std::string& path, const ShardMeta& want) {
  Hid f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, file_access()), H5Fclose);
  if (f < 0) {
    LOG_WARN("[hyps] {} cannot be opened ({}): building it again", path, h5_error());
    return false;
  }
  Hid root(H5Gopen2(f, "/", H5P_DEFAULT), H5Gclose);
  const bool same = read_attr_str(root, "embedder", path) == want.embedder &&
                    read_attr_f64(root, "sigma", path) == want.sigma &&
                    uint64_t(read_attr_i64(root, "noise_seed", path)) == want.noise_seed &&
                    read_attr_i64(root, "dim", path) == want.dim && read_attr_str(root, "dtype", path) == want.dtype &&
                    read_attr_str(root, "corpus_sha256", path) == want.corpus_sha256 &&
                    read_attr_i64(root, "row_begin", path) == want.row_begin &&
                    read_attr_i64(root, "row_end", path) == want.row_end;
  DAEI_CHECK(same, "{} holds hypotheses of another build (other training cache, models, embedder, sigma, dtype or "
             "shard size): delete {} and run again (nothing was overwritten)", path,
             fs::path(path).parent_path().string());
  return true;
}

struct Plan {
  std::string error, source;
  bool done = false;
  int64_t rows = 0, dim = 0;
  std::vector<int64_t> todo;
};

}  // namespace

HypothesisCacheResult build_hypothesis_cache(const HypothesisCacheOptions& opt, InverterImpl& inverter, DaeImpl* dae,
                                             const SpmTokenizer& tok, const NoisyEmbedder& emb, Communicator& comm) {
  quiet_hdf5();
  const auto t0 = std::chrono::steady_clock::now();
  const int rank = comm.rank(), world = comm.size();
  DAEI_CHECK(opt.shard_rows > 0 && opt.batch_size > 0 && opt.max_length >= 2,
             "hypotheses: shard_rows > 0, batch_size > 0 and max_length >= 2 required");
  DAEI_CHECK(opt.dtype == "float16" || opt.dtype == "float32", "cache.dtype must be float16 or float32, got '{}'",
             opt.dtype);
  DAEI_CHECK(!dae || opt.dae_sigma > 0, "hypotheses: the DAE's sigma must be > 0, got {}", opt.dae_sigma);
  inverter.eval();
  if (dae) dae->eval();
  ShardMeta base{"noisy", opt.split, emb.id(), opt.dtype, "", emb.sigma(), emb.seed(), 0, 0, 0};

  // Rank 0 checks and plans; every rank gets the plan (or the error).
  Plan plan;
  if (rank == 0) {
    try {
      auto train = NoisyCache::open(opt.train_cache_dir);
      plan.rows = opt.max_rows > 0 ? std::min<int64_t>(opt.max_rows, train->size()) : train->size();
      plan.dim = train->dim();
      DAEI_CHECK(plan.dim == emb.dim(), "{}: {}-d rows, but the embedder gives {}-d vectors", opt.train_cache_dir,
                 plan.dim, emb.dim());
      plan.source = source_digest(opt, inverter, dae);
      base.corpus_sha256 = plan.source;
      base.dim = plan.dim;
      const std::string mp = opt.cache_dir + "/manifest.json";
      if (file_exists(mp)) {
        json m = json::parse(read_file(mp));
        plan.done = m.value("corpus_sha256", "") == plan.source && m.value("rows", int64_t(-1)) == plan.rows &&
                    m.value("embedder", "") == base.embedder && m.value("sigma", -1.0) == base.sigma &&
                    m.value("noise_seed", uint64_t(0)) == base.noise_seed && m.value("dtype", "") == base.dtype &&
                    m.value("shard_rows", int64_t(-1)) == opt.shard_rows;
        DAEI_CHECK(plan.done, "{} describes hypotheses of another build (other training cache, stage-3 models, "
                   "embedder, sigma, dtype or shard size): delete {} to build them again (nothing was overwritten)",
                   mp, opt.cache_dir);
      }
      if (!plan.done && fs::is_directory(opt.cache_dir))
        for (auto& e : fs::directory_iterator(opt.cache_dir))
          if (e.path().filename().string().find(".tmp-") != std::string::npos) {
            LOG_INFO("[hyps] removing partial {}", e.path().string());
            fs::remove(e.path());
          }
      const int64_t n_shards = (plan.rows + opt.shard_rows - 1) / opt.shard_rows;
      for (int64_t s = 0; s < n_shards && !plan.done; ++s) {
        ShardMeta w = base;
        w.row_begin = s * opt.shard_rows;
        w.row_end = std::min(plan.rows, (s + 1) * opt.shard_rows);
        const std::string p = opt.cache_dir + "/" + shard_name(s);
        if (!(file_exists(p) && shard_ok(p, w))) plan.todo.push_back(s);
      }
    } catch (const std::exception& e) {
      plan.error = e.what();
    }
  }
  {
    json j{{"error", plan.error}, {"source", plan.source}, {"done", plan.done}, {"rows", plan.rows},
           {"dim", plan.dim}, {"todo", plan.todo}};
    j = json::parse(comm.broadcast(rank == 0 ? j.dump() : std::string(), 0));
    plan.error = j["error"];
    plan.source = j["source"];
    plan.done = j["done"];
    plan.rows = j["rows"];
    plan.dim = j["dim"];
    plan.todo = j["todo"].get<std::vector<int64_t>>();
  }
  if (!plan.error.empty()) {
    if (rank != 0) comm.barrier();
    throw Error(plan.error);
  }
  base.corpus_sha256 = plan.source;
  base.dim = plan.dim;
  HypothesisCacheResult res;
  res.rows = plan.rows;
  res.shards = (plan.rows + opt.shard_rows - 1) / opt.shard_rows;
  res.source_sha256 = plan.source;
  if (plan.done) {
    res.already_complete = true;
    LOG_INFO("[hyps] {}: complete ({} rows); nothing to do", opt.cache_dir, res.rows);
    return res;
  }
  make_dirs(opt.cache_dir);
  std::vector<int64_t> mine;
  for (size_t i = 0; i < plan.todo.size(); ++i)
    if (int(i % world) == rank) mine.push_back(plan.todo[i]);
  LOG_INFO("[hyps] {}: {} rows in {} shards; {} to build over {} ranks", opt.cache_dir, plan.rows, res.shards,
           plan.todo.size(), world);

  auto train = NoisyCache::open(opt.train_cache_dir);
  const auto dev = inverter.t5->shared->weight.device();
  GenerateOptions g;
  g.max_length = opt.max_length;  // greedy
  int64_t my_rows = 0;
  for (int64_t s : mine) my_rows += std::min(plan.rows, (s + 1) * opt.shard_rows) - s * opt.shard_rows;
  Progress progress("hyps", my_rows, "rows", 10.0);
  int64_t done_rows = 0;
  for (int64_t s : mine) {
    ShardMeta w = base;
    w.row_begin = s * opt.shard_rows;
    w.row_end = std::min(plan.rows, (s + 1) * opt.shard_rows);
    const int64_t n = w.row_end - w.row_begin;
    std::vector<int64_t> rows(n);
    for (int64_t i = 0; i < n; ++i) rows[i] = w.row_begin + i;
    const std::vector<int64_t> ids = train->ids(rows);
    std::vector<std::string> texts;
    texts.reserve(n);
    at::Tensor noisy = torch::empty({n, plan.dim}, torch::kFloat32);
    for (int64_t b = 0; b < n; b += opt.batch_size) {
      const int64_t e = std::min(n, b + opt.batch_size);
      std::vector<std::string> bt;
      {
        torch::NoGradGuard ng;
        auto y = train->noisy_range(w.row_begin + b, w.row_begin + e).to(dev);
        auto den = dae ? dae->forward(y, torch::full({e - b}, opt.dae_sigma, y.options())) : y;
        bt = tok.decode_batch(inverter.generate(den, g).cpu());
      }
      std::vector<std::string> keys;
      for (int64_t i = b; i < e; ++i) keys.push_back(hypothesis_query_key(opt.round, ids[i], bt[i - b]));
      at::Tensor q = mean_of_queries([&emb](const auto& t, const auto& k) { return emb.embed(t, k); }, bt, keys,
                                     opt.queries_per_text);
      DAEI_CHECK(q.dim() == 2 && q.size(0) == e - b && q.size(1) == plan.dim,
                 "the embedder returned ({}) for {} texts, expected {}-d rows",
                 fmt::format("{}", fmt::join(q.sizes(), ", ")), e - b, plan.dim);
      noisy.slice(0, b, e).copy_(q);
      for (auto& t : bt) texts.push_back(std::move(t));
      done_rows += e - b;
      progress.update(done_rows);
    }
    write_shard(opt.cache_dir + "/" + shard_name(s), w, ids, noisy, texts);
    ++res.shards_built;
  }
  comm.barrier();
  if (rank == 0) {
    json shards = json::array();
    for (int64_t s = 0; s < res.shards; ++s) {
      const std::string p = opt.cache_dir + "/" + shard_name(s);
      ShardMeta want = base;
      want.row_begin = s * opt.shard_rows;
      want.row_end = std::min(plan.rows, (s + 1) * opt.shard_rows);
      DAEI_CHECK(file_exists(p) && shard_ok(p, want), "{}: shard missing after the build (a rank failed?)", p);
      Hid f(H5Fopen(p.c_str(), H5F_ACC_RDONLY, file_access()), H5Fclose);
      Hid root(H5Gopen2(f, "/", H5P_DEFAULT), H5Gclose);
      shards.push_back({{"file", shard_name(s)}, {"rows", want.row_end - want.row_begin},
                        {"row_begin", want.row_begin}, {"row_end", want.row_end},
                        {"content_sha256", read_attr_str(root, "content_sha256", p)}});
    }
    json m{{"schema", kCacheSchema}, {"kind", "noisy"}, {"split", opt.split}, {"rows", plan.rows},
           {"dim", plan.dim}, {"dtype", opt.dtype}, {"embedder", base.embedder}, {"sigma", base.sigma},
           {"noise_seed", base.noise_seed}, {"corpus_sha256", plan.source}, {"shard_rows", opt.shard_rows},
           {"offline_eval_only", false}, {"written_by_world_size", world}, {"shards", shards},
           {"hypotheses", {{"train_cache", opt.train_cache_dir}, {"dae_sigma", opt.dae_sigma}, {"round", opt.round},
                           {"max_length", opt.max_length}, {"decoding", "greedy"},
                           {"noise_key", "hyp/r<round>/<id>/<hypothesis text>"}}}};
    write_file_atomic(opt.cache_dir + "/manifest.json", m.dump(1) + "\n");
  }
  comm.barrier();
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  LOG_INFO("[hyps] {}: done, {} rows ({} shards built here) in {:.1f} s", opt.cache_dir, res.rows, res.shards_built,
           res.seconds);
  return res;
}

}  // namespace daei
