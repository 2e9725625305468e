// Noisy-embedding caches (issue 4): MPI-sharded HDF5 files written by `daei cache build`, read by training
// through NoisyCache (a NoisyDataset), checked by `daei cache verify`.
//
//   cache/SPLIT/shard-00000.h5   ids[N] int64, noisy[N,d] float16|float32, text[bytes] uint8 (UTF-8, rows
//                                concatenated) + text_offsets[N+1] int64; every dataset chunked by rows (~1 MB)
//                                with fletcher32; file format 1.10 (metadata checksums). Attributes: schema,
//                                embedder, sigma, noise_seed, dim, dtype, split, row_begin, row_end, corpus_sha256,
//                                content_sha256.
//   cache/SPLIT/manifest.json    written last by rank 0 = DONE: shards, rows, per-shard digests, embedder, σ, dim…
//   cache/SPLIT/clean/...        clean embeddings (`--clean`, evaluation splits): same layout with clean[N,d]
//                                float32 and attribute offline_eval_only = 1. Only CleanCache (src/eval) opens them.
//
// Content digest: SHA-256 over rows in order, each row = id (int64 LE) ‖ vector bytes as stored ‖ text length
// (uint64 LE) ‖ text bytes. It does not depend on the shard size or on how many ranks wrote the cache.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "data/cache_manifest.h"  // kCacheSchema
#include "data/dataset.h"

namespace daei {

class Config;
class Communicator;
class Embedder;
class NoisyEmbedder;

#define DAEI_CACHE_READ_AHEAD 1  // NoisyCache has CacheReadOptions, prefetch() and read_stats()

struct CacheBuildOptions {
  std::string split;           // train, val, test, ood-fortunes, ...
  std::string corpus_file;     // corpus/SPLIT.jsonl
  std::string cache_dir;       // cache/SPLIT
  int64_t shard_rows = 20000;
  int64_t batch_size = 256;    // texts per embedder call
  std::string dtype = "float16";  // float16 | float32
  int64_t chunk_kb = 64;       // HDF5 chunk size: a random row read costs one chunk (see CacheReadOptions)
  bool clean = false;          // also write clean/ (offline evaluation only)
  // The clean rows' model when it is not the release's own embedder (make_reference_embedder: a remote release, or
  // reference.embedder set); null: the release's embedder without its noise.
  std::shared_ptr<const Embedder> clean_embedder;
  bool clean_train_reference = false;  // allow clean embeddings of the training split (clean-to-clean reference)
  double max_rows_per_s = 0;   // per-rank query rate limit (0 = none): be gentle with a remote service
  // Called on rank 0 once the request passed its checks and the split's lock is held, before anything is written
  // (`daei cache build` saves config.yaml there).
  std::function<void()> on_locked;
  // The cache.* keys (read_config_fields); split, corpus_file and cache_dir come from the run's layout.
  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("shard_rows", s.shard_rows), v("batch_size", s.batch_size), v("dtype", s.dtype), v("chunk_kb", s.chunk_kb);
    v("clean_train_reference", s.clean_train_reference), v("max_rows_per_s", s.max_rows_per_s);
  }
  static CacheBuildOptions from_config(const Config& cfg, const std::string& run_dir, const std::string& split);
};

struct CacheBuildResult {
  int64_t rows = 0, shards = 0, shards_built = 0, rows_built = 0;  // rows_built: by all ranks in this run
  double seconds = 0;
  bool already_complete = false;
};

// Collective over comm: every rank calls it. Shards round-robin over ranks; complete shards are kept; rank 0
// writes manifest.json after a barrier.
CacheBuildResult build_cache(const CacheBuildOptions& opt, const NoisyEmbedder& embedder, Communicator& comm);

struct VerifyResult {
  int64_t rows = 0, shards = 0, dim = 0;
  std::string digest, embedder, dtype;
  double sigma = 0;
  // What the manifest says (read_json_fields); shards and digest are counted and computed.
  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("rows", s.rows), v("dim", s.dim), v("dtype", s.dtype), v("embedder", s.embedder), v("sigma", s.sigma);
  }
};
// Checks every shard's checksums (fletcher32 on read, content digest) and attributes against the manifest.
// Throws Error naming the shard on the first problem. kind = "noisy" or "clean".
VerifyResult verify_cache(const std::string& cache_dir, bool clean = false);

// What a reader expects of a cache; empty / negative fields are not checked.
struct CacheExpect {
  std::string embedder;
  double sigma = -1;
  int64_t dim = -1;
  // The corpus the cache must have been built from (its SHA-256 is compared with the manifest's corpus_sha256).
  // Empty: the run's corpus by the folder layout (runs/NAME/corpus/SPLIT.jsonl next to runs/NAME/cache/SPLIT),
  // checked when that file exists; "-": not checked.
  std::string corpus_file;
};

// How the reader buffers rows. Reads are chunk-aligned: the rows a call asks for are sorted, grouped by shard and
// by HDF5 chunk, each needed run of chunks is read once, and the rows are scattered back into request order.
// Decoded chunks stay in an LRU of at most buffer_bytes (plus the chunks the call in progress holds), whatever the
// corpus size; HDF5's own per-dataset chunk caches are off (they grew with the number of shards).
struct CacheReadOptions {
  int64_t buffer_bytes = int64_t(64) << 20;
  bool read_ahead = true;  // prefetch() loads rows on a background thread; false: prefetch() does nothing
};

struct CacheReadStats {
  int64_t chunk_hits = 0, chunk_misses = 0, chunk_reads = 0;  // chunk_reads: H5Dread calls (one per run of chunks)
  int64_t bytes_read = 0;       // decoded bytes read from the shards
  int64_t buffer_bytes = 0;     // bytes in the LRU now
  int64_t peak_buffer_bytes = 0;   // most bytes the LRU held after any call
  int64_t peak_pinned_bytes = 0;   // most bytes held at once by the LRU and the calls in progress
};

// The training reader. Refuses offline_eval_only files with an error that explains the threat model.
class NoisyCache final : public NoisyDataset {
 public:
  // cache_dir = runs/NAME/cache/SPLIT. Checks the manifest and that every shard agrees with it.
  // Also checks what `cache verify` checks that is cheap: each shard's stored content digest and corpus hash
  // against the manifest, and the manifest's corpus hash against the run's corpus file (see CacheExpect).
  static std::unique_ptr<NoisyCache> open(const std::string& cache_dir, const CacheExpect& expect = {},
                                          const CacheReadOptions& read = {});
  ~NoisyCache() override;
  int64_t size() const override { return rows_; }
  int64_t dim() const override { return dim_; }
  double sigma() const override { return sigma_; }
  at::Tensor noisy(const std::vector<int64_t>& idx) const override;       // float32 [n, d]
  std::vector<std::string> texts(const std::vector<int64_t>& idx) const override;
  // Read-ahead: loads the chunks of rows idx (and of their texts when with_texts) into the buffer on a background
  // thread and returns at once. At most one request waits; a newer one replaces it.
  void prefetch(const std::vector<int64_t>& idx, bool with_texts) const override;
  void wait_prefetch() const;  // until no read-ahead is running or waiting (tests, benchmarks)
  CacheReadStats read_stats() const;
  at::Tensor noisy_range(int64_t begin, int64_t end) const;                // float32 rows [begin, end)
  at::Tensor all_noisy() const { return noisy_range(0, rows_); }
  std::vector<int64_t> ids(const std::vector<int64_t>& idx) const;         // corpus ids of rows
  const std::string& embedder() const { return embedder_; }
  const std::string& dtype() const { return dtype_; }
  uint64_t noise_seed() const { return noise_seed_; }

  struct Shard;
  struct Buffer;
 private:
  NoisyCache() = default;
  static std::unique_ptr<NoisyCache> open_kind(const std::string& dir, const std::string& kind,
                                               const CacheExpect& expect, const CacheReadOptions& read);
  size_t shard_of(int64_t row) const;
  std::vector<std::unique_ptr<Shard>> shards_;
  int64_t rows_ = 0, dim_ = 0;
  double sigma_ = 0;
  uint64_t noise_seed_ = 0;
  std::string embedder_, dtype_, dir_;
  std::unique_ptr<Buffer> buf_;  // the chunk LRU, its lock and the read-ahead thread
  friend class CleanCache;
};

// The clean reader, CleanCache, is declared in src/eval/clean_cache.h and defined in daei_eval, which the training
// stages do not link: an attack stage cannot even name it (threat model, DESIGN.md). It opens cache/SPLIT/clean
// through NoisyCache::open_kind, hence the friend declaration above.
class CleanCache;

}  // namespace daei
