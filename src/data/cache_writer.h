// The one cache writer (data/cache.h describes the files): every cache of a run — `daei cache build`'s noisy (and
// offline-eval clean) caches, the hypothesis caches of stage 4, any future one — is written through it, so the
// protocol and the manifest schema live here alone:
//   plan      rank 0 checks the request (the caller's `describe`), finds which shards of an earlier build are
//             complete and intact (kept) and which to build, removes partial files; a kept shard must be the one
//             this build would write, or the build is refused naming it (nothing overwritten)
//   broadcast every rank gets the plan, or the error (thrown on every rank)
//   assign    shards to build round-robin over the ranks
//   write     each shard under a temporary name, renamed; optionally on a background thread, batch by batch, while
//             the caller produces the next rows
//   manifest  after a barrier rank 0 writes manifest.json last (= complete), the clean one too
// The caller produces the rows of its shards (embedding corpus texts, decoding hypotheses, ...).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <torch/types.h>

namespace daei {

class Communicator;
class NoisyEmbedder;

struct CacheWriterOptions {
  std::string dir;    // cache/SPLIT
  std::string split;  // the manifest's split
  std::string embedder, dtype = "float16";  // float16 | float32
  double sigma = 0;
  uint64_t noise_seed = 0;
  int64_t shard_rows = 20000;
  int64_t chunk_kb = 64;     // HDF5 chunk size of each dataset
  bool clean = false;        // also write dir/clean (offline evaluation only)
  bool overlap_writes = false;  // write on a background thread (the caller must not use HDF5 until finish())
  std::string log_tag = "cache";
  nlohmann::json manifest_extra = nlohmann::json::object();  // more fields of manifest.json (not of clean/)
  // The refusal of an existing manifest or shard written by another build (file, the cache folder); empty: the
  // generic refusals, which name what differs.
  std::function<std::string(const std::string& file, const std::string& dir)> other_build;
};

// A cache of emb's answers (its id, σ and noise seed) in dir.
CacheWriterOptions cache_writer_options(const NoisyEmbedder& emb, const std::string& dir, const std::string& split,
                                        const std::string& dtype, int64_t shard_rows);

// What rank 0 found out about the rows to cache (CacheWriter::plan).
struct CacheSource {
  int64_t rows = 0, dim = 0;
  std::string sha256;  // the source's digest, stored as corpus_sha256: the corpus, or what hypotheses came from
};

class CacheWriter {
 public:
  CacheWriter(CacheWriterOptions opt, Communicator& comm);
  ~CacheWriter();
  CacheWriter(const CacheWriter&) = delete;
  CacheWriter& operator=(const CacheWriter&) = delete;

  // Collective. Rank 0 calls describe (its checks may throw) and plans; every rank gets the plan or throws the
  // same error. Returns false when every cache asked for is complete (nothing to do).
  // source_digest, when given, computes the source's SHA-256 on any rank (describe's sha256 is then not used): a
  // fresh build with overlap_writes runs it on the writer's thread while the first rows are produced, and
  // source_sha256() holds it after finish().
  bool plan(const std::function<CacheSource()>& describe,
            const std::function<std::string()>& source_digest = nullptr);

  int64_t rows() const;
  int64_t dim() const;
  const std::string& source_sha256() const;
  int64_t shards() const;                      // of the whole cache
  const std::vector<int64_t>& todo() const;    // shards to build, over all ranks
  const std::vector<int64_t>& mine() const;    // this rank's, in order
  int64_t shard_begin(int64_t s) const;
  int64_t shard_end(int64_t s) const;
  int64_t rows_of(const std::vector<int64_t>& shards) const;

  // Shard s of this rank, streamed: begin(s), its rows in order in batches of any size (ids, noisy and, when asked
  // for, clean float32 [b, d] rows, texts), end(). With overlap_writes each call queues the work on the writer's
  // thread and returns (a few batches ahead at most), so a shard's write overlaps the production of its rows; an
  // error of the write is thrown by a later call. The tensors must not be modified after they are passed.
  void begin(int64_t s);
  void append(std::vector<int64_t> ids, at::Tensor noisy, at::Tensor clean, std::vector<std::string> texts);
  void end();
  // A whole shard at once: begin(s), one append, end().
  void write(int64_t s, std::vector<int64_t> ids, at::Tensor noisy, at::Tensor clean, std::vector<std::string> texts);
  // Collective: waits for the writes; after a barrier rank 0 writes the manifests; a barrier.
  void finish();

  struct State;
 private:
  std::unique_ptr<State> st_;
};

}  // namespace daei
