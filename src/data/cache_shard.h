// Internal to the cache implementation (cache.cpp, cache_build.cpp, cache_shard.cpp): HDF5 handles and attribute
// helpers, the shard metadata, shard writing, and the manifest reader. Not part of the public cache API.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>
#include <functional>
#include <torch/types.h>

#include "core/sha256.h"

namespace daei {
namespace cache_detail {

// An HDF5 id closed by its close function when it goes out of scope.
struct Hid {
  hid_t id = -1;
  herr_t (*close)(hid_t) = nullptr;
  Hid() = default;
  Hid(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  Hid(Hid&& o) noexcept : id(o.id), close(o.close) { o.id = -1; }
  Hid& operator=(Hid&& o) noexcept {
    reset();
    id = o.id;
    close = o.close;
    o.id = -1;
    return *this;
  }
  ~Hid() { reset(); }
  void reset() {
    if (id >= 0 && close) close(id);
    id = -1;
  }
  operator hid_t() const { return id; }
};

struct ShardMeta {
  std::string kind;  // "noisy" | "clean"
  std::string split, embedder, dtype, corpus_sha256;
  double sigma = 0;
  uint64_t noise_seed = 0;
  int64_t dim = 0, row_begin = 0, row_end = 0;
  int64_t chunk_bytes = int64_t(1) << 20;  // HDF5 chunk size of each dataset (cache.chunk_kb); not an attribute
};

void quiet_hdf5();
// The serial HDF5 library is not thread-safe: every HDF5 call of the reader and of verify (any cache, any thread)
// holds this. HDF5's automatic error printing is per thread, so it is turned off here, in whichever thread is about
// to call HDF5 (the read-ahead worker as well as the caller), or a failed read prints its whole error stack.
std::recursive_mutex& hdf5_mutex();
// A shard's attribute against the manifest's value: an error naming the shard when they differ.
void check_eq(const std::string& path, const char* what, const std::string& got, const std::string& want);
std::string h5_error();  // the HDF5 error stack as one line, then cleared
bool looks_like_checksum(const std::string& e);
[[noreturn]] void fail_read(const std::string& path, const std::string& what);
// The file-access list of every shard read: 1.10 format, no file locks, a metadata cache fixed at
// kMetadataCacheBytes a file (HDF5's default adapts up to 32 MB a file, so memory grew with the open shards).
constexpr size_t kMetadataCacheBytes = 256 * 1024;
hid_t file_access();
hid_t f16_type();
void attr_str(hid_t obj, const char* name, const std::string& v);
void attr_i64(hid_t obj, const char* name, int64_t v);
void attr_f64(hid_t obj, const char* name, double v);
bool has_attr(hid_t obj, const char* name);
std::string read_attr_str(hid_t obj, const char* name, const std::string& path);
int64_t read_attr_i64(hid_t obj, const char* name, const std::string& path);
double read_attr_f64(hid_t obj, const char* name, const std::string& path);
void write_dataset(hid_t file, const char* name, hid_t file_type, hid_t mem_type, size_t elem, int64_t rows,
                   int64_t cols, const void* data, int64_t chunk_bytes = int64_t(1) << 20);
size_t elem_size(const std::string& dtype);
void hash_row(Sha256& h, int64_t id, const void* vec, size_t vec_bytes, const char* text, uint64_t len);
// One shard written as its rows arrive, batch by batch, under a temporary name that close() renames into place, so
// the write of a shard overlaps the production of its rows (the cache writer's background thread). The rows'
// datasets are written as they come; the texts, offsets and attributes at close(). A stream destroyed before close()
// (an error) removes its temporary file. Any failure throws one line naming the shard ("no space left on device"
// for a full disk) and removes the temporary file. Not thread-safe: one thread drives a stream.
class ShardStream {
 public:
  ShardStream(std::string path, ShardMeta m, int64_t rows);
  ~ShardStream();
  ShardStream(const ShardStream&) = delete;
  ShardStream& operator=(const ShardStream&) = delete;
  // The next vectors.size(0) rows: their ids, float32 (or float16) [n, dim] vectors and texts.
  void append(const int64_t* ids, const at::Tensor& vectors, const std::string* texts);
  std::string close();  // all rows appended: writes the rest, renames into place; the content digest

 private:
  void check_space(uint64_t need) const;
  void abandon();  // handles closed, the temporary file removed
  void guarded(const std::function<void()>& step);
  std::string path_, tmp_;
  ShardMeta m_;
  int64_t rows_, written_ = 0;
  size_t elem_;
  Hid f_, ids_, vectors_;
  Sha256 digest_;
  std::string blob_;  // the texts so far, written at close()
  std::vector<int64_t> offsets_;
  bool failed_ = false, closed_ = false;
};
// A whole shard at once (a ShardStream of one batch); returns its content digest.
std::string write_shard(const std::string& path, const ShardMeta& m, const std::vector<int64_t>& ids,
                        const at::Tensor& vectors, const std::vector<std::string>& texts);
std::string shard_name(int64_t s);
ShardMeta clean_meta(ShardMeta m);
nlohmann::json read_manifest(const std::string& dir, const std::string& split_hint);
// A corpus file's number of lines (= rows; a last line without its newline counts).
int64_t count_lines(const std::string& path);
// One pass over a corpus file: its SHA-256 and its number of lines (= rows).
std::pair<std::string, int64_t> hash_and_count_lines(const std::string& path);
// The manifest `man` of the cache folder `dir` against the corpus of its split: the same SHA-256 and as many rows
// (a cache that lost shards, or a changed corpus, is refused naming both). corpus_file "": the run's corpus by the
// folder layout (runs/NAME/corpus/SPLIT.jsonl next to runs/NAME/cache/SPLIT[/clean]), checked when it exists;
// "-": not checked; another path: that file, which must exist.
void check_covers_corpus(const std::string& dir, const nlohmann::json& man, const std::string& corpus_file,
                         const std::string& split, bool clean);

}  // namespace cache_detail
}  // namespace daei
