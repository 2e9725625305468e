// `daei cache build`: a split's corpus texts embedded through the noisy (and, for evaluation splits, the clean)
// embedder, written through the cache writer (data/cache_writer.h) as resumable, MPI-sharded HDF5 caches.
#include "data/cache.h"

#include <algorithm>
#include <iterator>
#include <chrono>
#include <thread>
#include <tuple>
#include <torch/torch.h>

#include "core/config.h"
#include "core/dir_lock.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/sha256.h"
#include "data/cache_shard.h"  // count_lines
#include "data/cache_writer.h"
#include "data/corpus.h"
#include "data/run_layout.h"
#include "dist/communicator.h"
#include "model/release/embedder.h"

namespace daei {

CacheBuildOptions CacheBuildOptions::from_config(const Config& cfg, const std::string& run_dir,
                                                 const std::string& split) {
  CacheBuildOptions o;
  const RunLayout layout(run_dir);
  o.split = split;
  o.corpus_file = layout.corpus(split);
  o.cache_dir = layout.cache(split);
  read_config_fields(o, cfg, "cache");
  return o;
}

namespace {

CacheWriterOptions writer_options(const CacheBuildOptions& opt, const NoisyEmbedder& emb) {
  CacheWriterOptions wo = cache_writer_options(emb, opt.cache_dir, opt.split, opt.dtype, opt.shard_rows);
  wo.chunk_kb = opt.chunk_kb;
  wo.clean = opt.clean;
  if (opt.clean && opt.clean_embedder) wo.manifest_extra["clean_embedder"] = opt.clean_embedder->id();
  wo.overlap_writes = true;  // the main thread embeds the next shard and does not touch HDF5 meanwhile
  return wo;
}

// The (noisy, clean) rows of a batch of texts: the release's answers, and with --clean the clean embeddings
// beside them (undefined without).
std::pair<at::Tensor, at::Tensor> embed_batch(const CacheBuildOptions& opt, const NoisyEmbedder& emb,
                                              const std::vector<std::string>& texts,
                                              const std::vector<std::string>& keys, int64_t dim) {
  at::Tensor noisy, clean;
  if (opt.clean && opt.clean_embedder) {  // the defender's own model beside the release's answers
    clean = opt.clean_embedder->embed(texts);
    DAEI_CHECK(clean.size(1) == dim, "reference.embedder returned {}-d vectors, the release {}-d", clean.size(1),
               dim);
    noisy = emb.embed(texts, keys);
  } else if (opt.clean) {
    std::tie(clean, noisy) = emb.embed_with_clean(texts, keys);
  } else {
    noisy = emb.embed(texts, keys);
  }
  const int64_t n = static_cast<int64_t>(texts.size());
  DAEI_CHECK(noisy.dim() == 2 && noisy.size(0) == n, "embedder returned {} vectors for {} texts",
             noisy.dim() ? noisy.size(0) : 0, n);
  DAEI_CHECK(noisy.size(1) == dim, "embedder returned {}-d vectors, expected {}", noisy.size(1), dim);
  return {noisy, clean};
}

// This rank's shards (writer.mine()), read from the corpus in order, embedded and handed to the writer.
struct ShardBuilder {
  ShardBuilder(const CacheBuildOptions& opt_, const NoisyEmbedder& emb_, CacheWriter& writer_)
      : opt(opt_), emb(emb_), writer(writer_), dim(writer.dim()),
        progress(fmt::format("cache {}", opt.split), writer.rows_of(writer.mine()), "rows", 10.0) {}

  const CacheBuildOptions& opt;
  const NoisyEmbedder& emb;
  CacheWriter& writer;
  const int64_t dim;
  Progress progress;
  int64_t done_rows = 0, shards_built = 0;
  std::chrono::steady_clock::time_point rate_t0 = std::chrono::steady_clock::now();
  std::vector<int64_t> ids;  // the shard being read
  std::vector<std::string> texts;

  void build_mine() {
    const std::vector<int64_t>& mine = writer.mine();
    if (mine.empty()) return;
    size_t next = 0;  // index into mine
    for_each_corpus_row(opt.corpus_file, [&](int64_t row, int64_t id, std::string text) {
      if (next >= mine.size()) return;
      const int64_t s = row / opt.shard_rows;
      if (s != mine[next]) return;
      ids.push_back(id);
      texts.push_back(std::move(text));
      if (row + 1 == writer.shard_end(s)) {
        flush_shard(s);
        ++next;
      }
    });
    DAEI_CHECK(next == mine.size(), "{} changed while the cache was built (fewer rows than planned)", opt.corpus_file);
  }

  // A shard's rows are embedded batch by batch and each batch goes to the writer as it is ready: its write runs on
  // the writer's thread while the next batch is embedded, so only the last batch's write is left at the end.
  void flush_shard(int64_t s) {
    const int64_t n = ids.size();
    writer.begin(s);
    for (int64_t b = 0; b < n; b += opt.batch_size) {
      int64_t e = std::min(n, b + opt.batch_size);
      std::vector<std::string> bt(std::make_move_iterator(texts.begin() + b), std::make_move_iterator(texts.begin() + e)),
          keys;
      for (int64_t i = b; i < e; ++i) keys.push_back(opt.split + "/" + std::to_string(ids[i]));
      auto [noisy, clean] = embed_batch(opt, emb, bt, keys, dim);
      // The embedders return fresh tensors, which the writer's thread reads (and converts to the cache's dtype) later.
      writer.append(std::vector<int64_t>(ids.begin() + b, ids.begin() + e), noisy, clean, std::move(bt));
      done_rows += e - b;
      pace();
      progress.update(done_rows);
    }
    writer.end();
    ++shards_built;
    ids.clear();
    texts.clear();
  }

  // cache.max_rows_per_s: sleeps while ahead of that rate.
  void pace() const {
    if (opt.max_rows_per_s <= 0) return;
    double ahead = done_rows / opt.max_rows_per_s -
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - rate_t0).count();
    if (ahead > 0) std::this_thread::sleep_for(std::chrono::duration<double>(ahead));
  }
};

}  // namespace

CacheBuildResult build_cache(const CacheBuildOptions& opt, const NoisyEmbedder& emb, Communicator& comm) {
  auto t0 = std::chrono::steady_clock::now();
  const int world = comm.size();
  DAEI_CHECK(opt.shard_rows > 0 && opt.batch_size > 0, "cache.shard_rows and cache.batch_size must be > 0");
  DAEI_CHECK(opt.dtype == "float16" || opt.dtype == "float32", "cache.dtype must be float16 or float32, got '{}'",
             opt.dtype);
  DAEI_CHECK(opt.chunk_kb > 0, "cache.chunk_kb must be > 0");
  // Rank 0 checks the request, locks the split folder (as the training stages lock theirs: a second build of the
  // split is refused, naming its host and PID, before it removes anything) and counts and hashes the corpus. The lock
  // is declared before the writer so that, on an error, it is released only after the writer's last shard ended.
  DirLock lock;
  CacheWriter writer(writer_options(opt, emb), comm);
  const bool work = writer.plan([&] {
    DAEI_CHECK(!opt.clean || opt.split != "train" || opt.clean_train_reference,
               "clean embeddings of the training split are outside the threat model (the attack sees only noisy "
               "embeddings); they are built only for the clean-to-clean reference: set "
               "cache.clean_train_reference=true to ask for them");
    DAEI_CHECK(!opt.clean || emb.adds_noise() || opt.clean_embedder,
               "--clean needs a clean model: {} is a remote noisy release (set reference.embedder)",
               emb.id());
    DAEI_CHECK(file_exists(opt.corpus_file), "cannot read corpus file {} (run `daei corpus build` first)",
               opt.corpus_file);
    lock = DirLock(opt.cache_dir);  // after the checks above, which refuse without creating anything
    if (opt.on_locked) opt.on_locked();
    CacheSource src;
    src.rows = cache_detail::count_lines(opt.corpus_file);
    DAEI_CHECK(src.rows > 0, "corpus file {} has no rows", opt.corpus_file);
    src.dim = emb.dim();
    return src;
  }, [&] { return sha256_file(opt.corpus_file); });
  CacheBuildResult res;
  res.rows = writer.rows();
  res.shards = writer.shards();
  if (!work) {
    res.already_complete = true;
    LOG_INFO("[cache] {}: complete ({} rows, {} shards); nothing to do", opt.cache_dir, res.rows, res.shards);
    return res;
  }
  LOG_INFO("[cache] {}: {} rows in {} shards; {} shards to build over {} ranks ({} kept)", opt.cache_dir, res.rows,
           res.shards, writer.todo().size(), world, res.shards - int64_t(writer.todo().size()));
  ShardBuilder shards(opt, emb, writer);
  shards.build_mine();
  res.shards_built = shards.shards_built;
  writer.finish();
  res.rows_built = writer.rows_of(writer.todo());
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  LOG_INFO("[cache] {}: done, {} rows ({} built in this run) in {:.1f} s", opt.cache_dir, res.rows, res.rows_built,
           res.seconds);
  return res;
}

}  // namespace daei
