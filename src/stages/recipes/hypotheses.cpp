// The hypothesis caches (see hypotheses.h): decoded and queried here, written through the one cache writer.
#include "stages/recipes/hypotheses.h"

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/sha256.h"
#include "data/cache.h"
#include "data/cache_writer.h"
#include "data/run_layout.h"
#include "dist/communicator.h"
#include "model/attack/dae.h"
#include "model/release/embedder.h"
#include "model/net/generate.h"
#include "model/attack/inverter.h"
#include "model/text/tokenizer_spm.h"
#include "stages/recipes/shared_options.h"

namespace daei {

HypothesisCacheOptions HypothesisCacheOptions::from_config(const Config& cfg, const std::string& run_dir,
                                                           const std::string& source_split, const std::string& split) {
  HypothesisCacheOptions o;
  const RunLayout layout(run_dir);
  o.train_cache_dir = layout.cache(source_split);
  o.cache_dir = layout.cache(split);
  o.split = split;
  fields(o, config_reader(cfg, "hypotheses"));
  if (source_split != "train") o.max_rows = HeldoutOptions::from_config(cfg).rows;
  CacheBuildOptions cache;  // the cache.* keys, as every cache is written
  CacheBuildOptions::fields(cache, config_reader(cfg, "cache"));
  o.shard_rows = cache.shard_rows;
  o.dtype = cache.dtype;
  // The corrector reads hypotheses of inverter.max_length_eval tokens (training and evaluation alike): decode them
  // at that length. A cache decoded at another length has another source digest and is refused on resume.
  o.max_length = InverterOptions::from_config(cfg).max_length_eval;
  o.decoding = hypotheses_decoding(cfg);
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
  // Greedy without repetition controls digests as before (caches built before these keys stay valid).
  if (const std::string d = describe_decoding(opt.decoding); d != "greedy") h.update("decoding=" + d + "\n");
  // Beam scores follow Hugging Face 4.33's length rule since 91ab62b: a beam cache from before is another source.
  if (opt.decoding.num_beams > 1) h.update(std::string("beam_length=hf-4.33\n"));
  if (!opt.input_tag.empty()) h.update("input=" + opt.input_tag + "\n");
  hash_module(h, inverter);
  if (dae)
    hash_module(h, *dae);
  else
    h.update(std::string("no DAE\n"));
  return h.hex();
}

}  // namespace

HypothesisCacheResult build_hypothesis_cache(const HypothesisCacheOptions& opt, InverterImpl& inverter, DaeImpl* dae,
                                             const SpmTokenizer& tok, const NoisyEmbedder& emb, Communicator& comm) {
  const auto t0 = std::chrono::steady_clock::now();
  const int world = comm.size();
  DAEI_CHECK(opt.shard_rows > 0 && opt.batch_size > 0 && opt.max_length >= 2,
             "hypotheses: shard_rows > 0, batch_size > 0 and max_length >= 2 required");
  DAEI_CHECK(opt.dtype == "float16" || opt.dtype == "float32", "cache.dtype must be float16 or float32, got '{}'",
             opt.dtype);
  DAEI_CHECK(!dae || opt.dae_sigma > 0, "hypotheses: the DAE's sigma must be > 0, got {}", opt.dae_sigma);
  inverter.eval();
  if (dae) dae->eval();
  CacheWriterOptions wo = cache_writer_options(emb, opt.cache_dir, opt.split, opt.dtype, opt.shard_rows);
  wo.chunk_kb = 1024;  // 1 MB HDF5 chunks, as the hypothesis caches have always been written
  wo.overlap_writes = false;  // decoding reads the training cache through HDF5 meanwhile
  wo.log_tag = "hyps";
  wo.manifest_extra = {{"hypotheses", {{"train_cache", opt.train_cache_dir}, {"dae_sigma", opt.dae_sigma},
                                       {"round", opt.round}, {"max_length", opt.max_length}, {"decoding", describe_decoding(opt.decoding)},
                                       {"noise_key", "hyp/r<round>/<id>/<hypothesis text>"}}}};
  if (!opt.input_tag.empty()) wo.manifest_extra["hypotheses"]["input"] = opt.input_tag;
  wo.other_build = [](const std::string& file, const std::string& dir) {
    // A cache/ linked whole from another run (another training seed) holds that run's hypotheses: deleting them
    // would break the other run, so say how to link instead.
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path d(dir);
    const bool linked = fs::is_symlink(d, ec) || fs::is_symlink(d.parent_path(), ec);  // cache/hyp-* or cache/
    const auto real = fs::canonical(d, ec);
    if (linked && !ec)
      return fmt::format("{} holds hypotheses of another build, and {} is another run's folder ({}): link that run's "
                         "caches split by split (cache/train, cache/val, cache/test, ...) rather than cache/ whole, so "
                         "that this run decodes its own (nothing was overwritten)", file, dir, real.string());
    return fmt::format("{} holds hypotheses of another build (other training cache, stage-3 models, embedder, sigma, "
                       "dtype or shard size): delete {} to build them again (nothing was overwritten)", file, dir);
  };
  CacheWriter writer(wo, comm);
  // Rank 0 checks the training cache and digests what the hypotheses come from; every rank gets the plan.
  const bool work = writer.plan([&] {
    auto train = NoisyCache::open(opt.train_cache_dir);
    CacheSource src;
    src.rows = opt.max_rows > 0 ? std::min<int64_t>(opt.max_rows, train->size()) : train->size();
    src.dim = train->dim();
    DAEI_CHECK(src.dim == emb.dim(), "{}: {}-d rows, but the embedder gives {}-d vectors", opt.train_cache_dir,
               src.dim, emb.dim());
    src.sha256 = source_digest(opt, inverter, dae);
    return src;
  });
  HypothesisCacheResult res;
  res.rows = writer.rows();
  res.shards = writer.shards();
  res.source_sha256 = writer.source_sha256();
  if (!work) {
    res.already_complete = true;
    LOG_INFO("[hyps] {}: complete ({} rows); nothing to do", opt.cache_dir, res.rows);
    return res;
  }
  const int64_t dim = writer.dim();
  LOG_INFO("[hyps] {}: {} rows in {} shards; {} to build over {} ranks", opt.cache_dir, res.rows, res.shards,
           writer.todo().size(), world);

  auto train = NoisyCache::open(opt.train_cache_dir);
  const auto dev = inverter.t5->shared->weight.device();
  GenerateOptions g = opt.decoding;
  g.max_length = opt.max_length;
  Progress progress("hyps", writer.rows_of(writer.mine()), "rows", 10.0);
  int64_t done_rows = 0;
  for (int64_t s : writer.mine()) {
    const int64_t begin = writer.shard_begin(s), n = writer.shard_end(s) - begin;
    std::vector<int64_t> rows(n);
    for (int64_t i = 0; i < n; ++i) rows[i] = begin + i;
    std::vector<int64_t> ids = train->ids(rows);
    std::vector<std::string> texts;
    texts.reserve(n);
    at::Tensor noisy = torch::empty({n, dim}, torch::kFloat32);
    for (int64_t b = 0; b < n; b += opt.batch_size) {
      const int64_t e = std::min(n, b + opt.batch_size);
      std::vector<std::string> bt;
      {
        torch::NoGradGuard ng;
        auto y = (opt.input_rows ? opt.input_rows(begin + b, begin + e) : train->noisy_range(begin + b, begin + e))
                     .to(dev);
        auto den = dae ? dae->forward(y, torch::full({e - b}, opt.dae_sigma, y.options())) : y;
        bt = tok.decode_batch(inverter.generate(den, g).cpu());
      }
      std::vector<std::string> keys;
      for (int64_t i = b; i < e; ++i) keys.push_back(hypothesis_query_key(opt.round, ids[i], bt[i - b]));
      at::Tensor q = mean_of_queries([&emb](const auto& t, const auto& k) { return emb.embed(t, k); }, bt, keys,
                                     opt.queries_per_text);
      DAEI_CHECK(q.dim() == 2 && q.size(0) == e - b && q.size(1) == dim,
                 "the embedder returned ({}) for {} texts, expected {}-d rows",
                 fmt::format("{}", fmt::join(q.sizes(), ", ")), e - b, dim);
      noisy.slice(0, b, e).copy_(q);
      for (auto& t : bt) texts.push_back(std::move(t));
      done_rows += e - b;
      progress.update(done_rows);
    }
    writer.write(s, std::move(ids), noisy, at::Tensor(), std::move(texts));
    ++res.shards_built;
  }
  writer.finish();
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  LOG_INFO("[hyps] {}: done, {} rows ({} shards built here) in {:.1f} s", opt.cache_dir, res.rows, res.shards_built,
           res.seconds);
  return res;
}

}  // namespace daei
