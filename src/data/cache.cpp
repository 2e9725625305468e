// The training reader of the noisy caches (NoisyCache, data/cache.h): opening and checking a cache against its
// manifest, chunk-aligned reads through a bounded LRU, and read-ahead on a background thread.
#include "data/cache.h"

#include <hdf5.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>
#include <torch/torch.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "data/cache_shard.h"

namespace daei {
namespace fs = std::filesystem;
using nlohmann::json;

using namespace cache_detail;

// ---------------------------------------------------------------------------------------------------------------
// Reader

namespace {

// One chunked dataset of a shard, read in whole chunks.
struct ChunkedDs {
  Hid ds;
  hid_t mem_type = -1;
  size_t elem = 0;            // bytes of one element in memory
  int64_t rows = 0, cols = 1;  // cols = 1 for 1-d datasets
  int64_t chunk_rows = 1;     // rows (elements for 1-d) per HDF5 chunk
  int rank = 1;
  int64_t row_bytes() const { return int64_t(elem) * cols; }
  int64_t n_chunks() const { return (rows + chunk_rows - 1) / chunk_rows; }
};

enum DsKind : uint64_t { kVec = 0, kIds = 1, kOffs = 2, kText = 3 };

uint64_t chunk_key(size_t shard, DsKind d, int64_t chunk) {
  return (uint64_t(shard) << 34) | (uint64_t(d) << 32) | uint64_t(chunk);
}

}  // namespace

struct NoisyCache::Shard {
  std::string path;
  Hid file;
  ChunkedDs ds[4];  // kVec, kIds, kOffs, kText
  int64_t begin = 0, end = 0;  // global rows
};

using Chunk = std::shared_ptr<const std::vector<char>>;
using Pinned = std::unordered_map<uint64_t, Chunk>;

// The LRU of decoded chunks and the read-ahead thread.
struct NoisyCache::Buffer {
  CacheReadOptions opt;
  std::mutex mu;  // the LRU and the stats; held while reading (so a read-ahead and a call never read twice)
  std::list<std::pair<uint64_t, Chunk>> lru;  // front = most recent
  std::unordered_map<uint64_t, std::list<std::pair<uint64_t, Chunk>>::iterator> where;
  int64_t bytes = 0, pinned = 0;
  CacheReadStats stats;
  // read-ahead
  std::mutex qmu;
  std::condition_variable qcv;
  bool stop = false, busy = false, has_req = false, req_texts = false;
  std::vector<int64_t> req;
  std::thread worker;
};

namespace {

ChunkedDs open_ds(hid_t file, const char* name, hid_t mem_type, size_t elem, const std::string& path) {
  ChunkedDs d;
  Hid dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
  H5Pset_chunk_cache(dapl, 0, 0, 1.0);  // our LRU bounds memory; HDF5's cache per dataset would grow with shards
  d.ds = Hid(H5Dopen2(file, name, dapl), H5Dclose);
  if (d.ds < 0) fail_read(path, fmt::format("dataset '{}'", name));
  d.mem_type = mem_type;
  d.elem = elem;
  Hid sp(H5Dget_space(d.ds), H5Sclose);
  hsize_t dims[2] = {0, 1};
  d.rank = H5Sget_simple_extent_ndims(sp);
  DAEI_CHECK(d.rank == 1 || d.rank == 2, "{}: dataset '{}' has rank {}", path, name, d.rank);
  H5Sget_simple_extent_dims(sp, dims, nullptr);
  d.rows = int64_t(dims[0]);
  d.cols = d.rank == 2 ? int64_t(dims[1]) : 1;
  Hid dcpl(H5Dget_create_plist(d.ds), H5Pclose);
  hsize_t cdims[2] = {0, 0};
  if (H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, 2, cdims) == d.rank && cdims[0] > 0)
    d.chunk_rows = int64_t(cdims[0]);
  else
    d.chunk_rows = std::max<int64_t>(1, (int64_t(1) << 20) / std::max<int64_t>(1, d.row_bytes()));
  return d;
}

// Rows [r0, r1) of d into out (r1 - r0 rows × row_bytes). Caller holds hdf5_mutex().
void read_range(const ChunkedDs& d, int64_t r0, int64_t r1, void* out, const std::string& path, const char* what) {
  if (r1 <= r0) return;
  Hid fsp(H5Dget_space(d.ds), H5Sclose);
  hsize_t start[2] = {hsize_t(r0), 0}, count[2] = {hsize_t(r1 - r0), hsize_t(d.cols)};
  H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, nullptr, count, nullptr);
  Hid msp(H5Screate_simple(d.rank, count, nullptr), H5Sclose);
  if (H5Dread(d.ds, d.mem_type, msp, fsp, H5P_DEFAULT, out) < 0) fail_read(path, what);
}

const char* ds_name(int k) {
  static const char* n[] = {"noisy rows", "ids", "text_offsets", "text"};
  return n[k];
}

}  // namespace

size_t NoisyCache::shard_of(int64_t g) const {
  DAEI_CHECK(g >= 0 && g < rows_, "{}: row {} outside [0, {})", dir_, g, rows_);
  auto it = std::upper_bound(shards_.begin(), shards_.end(), g,
                             [](int64_t v, const std::unique_ptr<Shard>& s) { return v < s->end; });
  return size_t(it - shards_.begin());
}

namespace {

// Loads the chunks named by keys (any order, repeats allowed) and returns them pinned: from the LRU where they
// are, otherwise read with one H5Dread per run of consecutive chunks of a dataset, then entered in the LRU (which
// evicts its least recently used chunks down to its budget; a pinned chunk lives on until the caller drops it).
Pinned fetch_chunks(NoisyCache::Buffer& B, const std::vector<std::unique_ptr<NoisyCache::Shard>>& shards,
                    std::vector<uint64_t> keys) {
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::lock_guard<std::mutex> lk(B.mu);
  Pinned out;
  out.reserve(keys.size());
  std::vector<uint64_t> miss;
  for (uint64_t k : keys) {
    auto it = B.where.find(k);
    if (it != B.where.end()) {
      B.lru.splice(B.lru.begin(), B.lru, it->second);
      out.emplace(k, it->second->second);
      ++B.stats.chunk_hits;
    } else {
      miss.push_back(k);
      ++B.stats.chunk_misses;
    }
  }
  int64_t pinned = 0;
  for (auto& [k, c] : out) pinned += int64_t(c->size());
  auto insert = [&](uint64_t k, Chunk c) {
    B.bytes += int64_t(c->size());
    B.lru.emplace_front(k, c);
    B.where[k] = B.lru.begin();
    while (B.bytes > B.opt.buffer_bytes && !B.lru.empty()) {
      B.bytes -= int64_t(B.lru.back().second->size());
      B.where.erase(B.lru.back().first);
      B.lru.pop_back();
    }
  };
  for (size_t i = 0; i < miss.size();) {
    size_t j = i + 1;  // a run: same shard and dataset, consecutive chunks
    while (j < miss.size() && (miss[j] >> 32) == (miss[i] >> 32) && miss[j] == miss[j - 1] + 1) ++j;
    const size_t s = size_t(miss[i] >> 34);
    const int kind = int((miss[i] >> 32) & 3);
    const NoisyCache::Shard& sh = *shards[s];
    const ChunkedDs& d = sh.ds[kind];
    const int64_t c0 = int64_t(miss[i] & 0xffffffffULL), c1 = int64_t(miss[j - 1] & 0xffffffffULL) + 1;
    const int64_t r0 = c0 * d.chunk_rows, r1 = std::min(d.rows, c1 * d.chunk_rows);
    std::vector<char> all(size_t((r1 - r0) * d.row_bytes()));
    {
      std::lock_guard<std::recursive_mutex> hl(hdf5_mutex());
      read_range(d, r0, r1, all.data(), sh.path, ds_name(kind));
    }
    ++B.stats.chunk_reads;
    B.stats.bytes_read += int64_t(all.size());
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t a = (c * d.chunk_rows - r0) * d.row_bytes();
      const int64_t b = (std::min(d.rows, (c + 1) * d.chunk_rows) - r0) * d.row_bytes();
      Chunk ch = std::make_shared<const std::vector<char>>(all.begin() + a, all.begin() + b);
      pinned += int64_t(ch->size());
      out.emplace(miss[i] + uint64_t(c - c0), ch);
      insert(miss[i] + uint64_t(c - c0), std::move(ch));
    }
    i = j;
  }
  B.stats.buffer_bytes = B.bytes;
  B.stats.peak_buffer_bytes = std::max(B.stats.peak_buffer_bytes, B.bytes);
  // bytes held at once: the LRU plus this call's pinned chunks that the LRU no longer holds
  int64_t extra = 0;
  for (auto& [k, c] : out)
    if (!B.where.count(k)) extra += int64_t(c->size());
  B.stats.peak_pinned_bytes = std::max(B.stats.peak_pinned_bytes, B.bytes + extra);
  (void)pinned;
  return out;
}

const char* row_ptr(const Pinned& p, size_t shard, DsKind kind, const ChunkedDs& d, int64_t local) {
  const int64_t c = local / d.chunk_rows;
  return p.at(chunk_key(shard, kind, c))->data() + (local - c * d.chunk_rows) * d.row_bytes();
}

}  // namespace

std::unique_ptr<NoisyCache> NoisyCache::open(const std::string& dir, const CacheExpect& expect,
                                             const CacheReadOptions& read) {
  return open_kind(dir, "noisy", expect, read);
}

std::unique_ptr<NoisyCache> NoisyCache::open_kind(const std::string& dir, const std::string& kind,
                                                  const CacheExpect& expect, const CacheReadOptions& read) {
  quiet_hdf5();
  std::lock_guard<std::recursive_mutex> hl(hdf5_mutex());
  const bool clean = kind == "clean";
  const std::string split = fs::path(clean ? fs::path(dir).parent_path() : fs::path(dir)).filename().string();
  if (clean && !file_exists(dir + "/manifest.json"))
    DAEI_FAIL("{}: no clean embeddings — run `daei cache build --split {} --clean` (evaluation splits only)", dir,
              split);
  json man = read_manifest(dir, split);
  const bool marked = man.value("kind", "noisy") != "noisy" || man.value("offline_eval_only", false);
  if (!clean && marked)
    DAEI_FAIL("{} holds clean embeddings (offline_eval_only): the attack may only see noisy embeddings of the texts "
              "it attacks (threat model, DESIGN.md). Training reads cache/SPLIT, never cache/SPLIT/clean; only "
              "evaluation and the clean-data references open clean files, through CleanCache", dir);
  DAEI_CHECK(!clean || (man.value("kind", "") == "clean" && marked), "{}: not a clean-embedding cache", dir);
  DAEI_CHECK(read.buffer_bytes > 0, "{}: the read buffer must be > 0 bytes", dir);
  std::unique_ptr<NoisyCache> c(new NoisyCache());
  c->dir_ = dir;
  c->rows_ = man.at("rows").get<int64_t>();
  c->dim_ = man.at("dim").get<int64_t>();
  c->sigma_ = man.at("sigma").get<double>();
  c->noise_seed_ = man.at("noise_seed").get<uint64_t>();
  c->embedder_ = man.at("embedder").get<std::string>();
  c->dtype_ = man.at("dtype").get<std::string>();
  const std::string corpus_sha = man.value("corpus_sha256", "");
  DAEI_CHECK(man.at("schema").get<int>() == kCacheSchema, "{}: cache schema {} (this daei reads {})", dir,
             man.at("schema").get<int>(), kCacheSchema);
  if (!expect.embedder.empty())
    DAEI_CHECK(expect.embedder == c->embedder_, "{}: built by embedder '{}', expected '{}'", dir, c->embedder_,
               expect.embedder);
  if (expect.sigma >= 0)
    DAEI_CHECK(std::abs(expect.sigma - c->sigma_) <= 1e-12 * std::max(1.0, expect.sigma),
               "{}/manifest.json: built at sigma {}, expected {}", dir, c->sigma_, expect.sigma);
  if (expect.dim >= 0)
    DAEI_CHECK(expect.dim == c->dim_, "{}: dimension mismatch: cache has {}-d vectors, expected {}", dir, c->dim_,
               expect.dim);
  // The corpus the cache was built from (hash and row count): the run's corpus file by the folder layout, unless
  // named or switched off.
  check_covers_corpus(dir, man, expect.corpus_file, split, clean);
  int64_t next = 0;
  const hid_t vec_type = c->dtype_ == "float16" ? f16_type() : H5T_NATIVE_FLOAT;
  const size_t vec_elem = elem_size(c->dtype_);
  for (const auto& s : man.at("shards")) {
    auto sh = std::make_unique<Shard>();
    sh->path = dir + "/" + s.at("file").get<std::string>();
    sh->begin = s.at("row_begin").get<int64_t>();
    sh->end = s.at("row_end").get<int64_t>();
    DAEI_CHECK(sh->begin == next && sh->end > sh->begin, "{}: manifest rows of {} are not contiguous", dir, sh->path);
    next = sh->end;
    DAEI_CHECK(file_exists(sh->path), "{}: shard missing — run `daei cache build --split {}{}` again", sh->path,
               split, clean ? " --clean" : "");
    sh->file = Hid(H5Fopen(sh->path.c_str(), H5F_ACC_RDONLY, file_access()), H5Fclose);
    if (sh->file < 0) fail_read(sh->path, "the file");
    Hid root(H5Gopen2(sh->file, "/", H5P_DEFAULT), H5Gclose);
    if (root < 0) fail_read(sh->path, "the root group");
    const bool shard_marked =
        has_attr(root, "offline_eval_only") && read_attr_i64(root, "offline_eval_only", sh->path) != 0;
    if (!clean && shard_marked)
      DAEI_FAIL("{} is marked offline_eval_only (clean embeddings): the attack may only see noisy embeddings "
                "(threat model, DESIGN.md); only evaluation opens it, through CleanCache", sh->path);
    DAEI_CHECK(!clean || shard_marked, "{}: not marked offline_eval_only", sh->path);
    DAEI_CHECK(read_attr_i64(root, "schema", sh->path) == kCacheSchema, "{}: schema differs from the manifest",
               sh->path);
    double sg = read_attr_f64(root, "sigma", sh->path);
    DAEI_CHECK(sg == c->sigma_, "{}: sigma is {} but the manifest says {} (a shard from another build: delete the "
               "cache folder and build again)", sh->path, sg, c->sigma_);
    check_eq(sh->path, "embedder", read_attr_str(root, "embedder", sh->path), c->embedder_);
    int64_t d = read_attr_i64(root, "dim", sh->path);
    DAEI_CHECK(d == c->dim_, "{}: dimension mismatch: shard has {}-d vectors, the manifest {}", sh->path, d, c->dim_);
    check_eq(sh->path, "dtype", read_attr_str(root, "dtype", sh->path), c->dtype_);
    DAEI_CHECK(read_attr_i64(root, "row_begin", sh->path) == sh->begin &&
                   read_attr_i64(root, "row_end", sh->path) == sh->end,
               "{}: row range differs from the manifest", sh->path);
    // The cheap part of `cache verify`: the digests the shard stores against the manifest's (a full verify
    // re-hashes every row; a shard copied in from another corpus's cache carries that cache's digests).
    check_eq(sh->path, "corpus_sha256 (the corpus it was built from)", read_attr_str(root, "corpus_sha256", sh->path),
             corpus_sha);
    check_eq(sh->path, "content_sha256", read_attr_str(root, "content_sha256", sh->path),
             s.value("content_sha256", ""));
    const int64_t n = sh->end - sh->begin;
    sh->ds[kVec] = open_ds(sh->file, kind.c_str(), vec_type, vec_elem, sh->path);
    sh->ds[kIds] = open_ds(sh->file, "ids", H5T_NATIVE_INT64, 8, sh->path);
    sh->ds[kOffs] = open_ds(sh->file, "text_offsets", H5T_NATIVE_INT64, 8, sh->path);
    sh->ds[kText] = open_ds(sh->file, "text", H5T_NATIVE_UINT8, 1, sh->path);
    DAEI_CHECK(sh->ds[kVec].rank == 2 && sh->ds[kVec].rows == n && sh->ds[kVec].cols == c->dim_,
               "{}: dimension mismatch: '{}' is [{}, {}], the manifest says [{}, {}]", sh->path, kind,
               sh->ds[kVec].rows, sh->ds[kVec].cols, n, c->dim_);
    DAEI_CHECK(sh->ds[kIds].rows == n && sh->ds[kOffs].rows == n + 1, "{}: ids or text_offsets do not have {} rows",
               sh->path, n);
    c->shards_.push_back(std::move(sh));
  }
  DAEI_CHECK(next == c->rows_, "{}: shards cover {} rows, the manifest says {}", dir, next, c->rows_);
  c->buf_ = std::make_unique<Buffer>();
  c->buf_->opt = read;
  return c;
}

NoisyCache::~NoisyCache() {
  if (buf_ && buf_->worker.joinable()) {
    {
      std::lock_guard<std::mutex> lk(buf_->qmu);
      buf_->stop = true;
    }
    buf_->qcv.notify_all();
    buf_->worker.join();
  }
  std::lock_guard<std::recursive_mutex> hl(hdf5_mutex());  // HDF5 handles close under the lock too
  shards_.clear();
}

at::Tensor NoisyCache::noisy_range(int64_t begin, int64_t end) const {
  DAEI_CHECK(0 <= begin && begin <= end && end <= rows_, "{}: rows [{}, {}) outside [0, {})", dir_, begin, end, rows_);
  // Contiguous: read straight into the result (no buffer), one H5Dread per shard.
  const bool half = dtype_ == "float16";
  at::Tensor out = torch::empty({end - begin, dim_}, half ? torch::kHalf : torch::kFloat32);
  if (end == begin) return out.to(torch::kFloat32);
  char* o = static_cast<char*>(out.data_ptr());
  const int64_t rb = dim_ * int64_t(elem_size(dtype_));
  std::lock_guard<std::recursive_mutex> hl(hdf5_mutex());
  for (size_t s = shard_of(begin); s < shards_.size() && shards_[s]->begin < end; ++s) {
    const Shard& sh = *shards_[s];
    const int64_t a = std::max(begin, sh.begin), b = std::min(end, sh.end);
    read_range(sh.ds[kVec], a - sh.begin, b - sh.begin, o + (a - begin) * rb, sh.path, ds_name(kVec));
  }
  return half ? out.to(torch::kFloat32) : out;
}

at::Tensor NoisyCache::noisy(const std::vector<int64_t>& idx) const {
  const int64_t n = idx.size();
  std::vector<size_t> sh(n);
  std::vector<uint64_t> keys(n);
  for (int64_t i = 0; i < n; ++i) {
    sh[i] = shard_of(idx[i]);
    const ChunkedDs& d = shards_[sh[i]]->ds[kVec];
    keys[i] = chunk_key(sh[i], kVec, (idx[i] - shards_[sh[i]]->begin) / d.chunk_rows);
  }
  Pinned p = fetch_chunks(*buf_, shards_, keys);
  const bool half = dtype_ == "float16";
  at::Tensor out = torch::empty({n, dim_}, half ? torch::kHalf : torch::kFloat32);
  char* o = static_cast<char*>(out.data_ptr());
  for (int64_t i = 0; i < n; ++i) {
    const Shard& s = *shards_[sh[i]];
    const ChunkedDs& d = s.ds[kVec];
    std::memcpy(o + i * d.row_bytes(), row_ptr(p, sh[i], kVec, d, idx[i] - s.begin), d.row_bytes());
  }
  return half ? out.to(torch::kFloat32) : out;
}

std::vector<std::string> NoisyCache::texts(const std::vector<int64_t>& idx) const {
  const int64_t n = idx.size();
  std::vector<size_t> sh(n);
  std::vector<uint64_t> keys;
  keys.reserve(2 * n);
  for (int64_t i = 0; i < n; ++i) {  // the offsets of each row: entries local and local + 1
    sh[i] = shard_of(idx[i]);
    const Shard& s = *shards_[sh[i]];
    const ChunkedDs& d = s.ds[kOffs];
    const int64_t local = idx[i] - s.begin;
    keys.push_back(chunk_key(sh[i], kOffs, local / d.chunk_rows));
    keys.push_back(chunk_key(sh[i], kOffs, (local + 1) / d.chunk_rows));
  }
  std::vector<std::pair<int64_t, int64_t>> span(n);
  {
    Pinned p = fetch_chunks(*buf_, shards_, keys);
    keys.clear();
    for (int64_t i = 0; i < n; ++i) {
      const Shard& s = *shards_[sh[i]];
      const ChunkedDs& d = s.ds[kOffs];
      const int64_t local = idx[i] - s.begin;
      int64_t a, b;
      std::memcpy(&a, row_ptr(p, sh[i], kOffs, d, local), 8);
      std::memcpy(&b, row_ptr(p, sh[i], kOffs, d, local + 1), 8);
      const ChunkedDs& t = s.ds[kText];
      DAEI_CHECK(0 <= a && a <= b && b <= t.rows, "{}: text_offsets of row {} are [{}, {}) outside the {} text bytes: "
                 "the shard is damaged; delete it and run `daei cache build` again", s.path, local, a, b, t.rows);
      span[i] = {a, b};
      for (int64_t c = a / t.chunk_rows; c * t.chunk_rows < b; ++c) keys.push_back(chunk_key(sh[i], kText, c));
    }
  }
  Pinned p = fetch_chunks(*buf_, shards_, keys);
  std::vector<std::string> out(n);
  for (int64_t i = 0; i < n; ++i) {
    const ChunkedDs& t = shards_[sh[i]]->ds[kText];
    auto [a, b] = span[i];
    std::string& str = out[i];
    str.resize(size_t(b - a));
    for (int64_t pos = a; pos < b;) {  // a text may cross chunk boundaries
      const int64_t c = pos / t.chunk_rows, ce = std::min(b, (c + 1) * t.chunk_rows);
      std::memcpy(str.data() + (pos - a), p.at(chunk_key(sh[i], kText, c))->data() + (pos - c * t.chunk_rows),
                  size_t(ce - pos));
      pos = ce;
    }
  }
  return out;
}

std::vector<int64_t> NoisyCache::ids(const std::vector<int64_t>& idx) const {
  const int64_t n = idx.size();
  std::vector<size_t> sh(n);
  std::vector<uint64_t> keys(n);
  for (int64_t i = 0; i < n; ++i) {
    sh[i] = shard_of(idx[i]);
    keys[i] = chunk_key(sh[i], kIds, (idx[i] - shards_[sh[i]]->begin) / shards_[sh[i]]->ds[kIds].chunk_rows);
  }
  Pinned p = fetch_chunks(*buf_, shards_, keys);
  std::vector<int64_t> out(n);
  for (int64_t i = 0; i < n; ++i) {
    const Shard& s = *shards_[sh[i]];
    std::memcpy(&out[i], row_ptr(p, sh[i], kIds, s.ds[kIds], idx[i] - s.begin), 8);
  }
  return out;
}

void NoisyCache::prefetch(const std::vector<int64_t>& idx, bool with_texts) const {
  Buffer& B = *buf_;
  if (!B.opt.read_ahead || idx.empty()) return;
  for (int64_t g : idx) DAEI_CHECK(g >= 0 && g < rows_, "{}: row {} outside [0, {})", dir_, g, rows_);
  {
    std::lock_guard<std::mutex> lk(B.qmu);
    B.req = idx;
    B.req_texts = with_texts;
    B.has_req = true;
    if (!B.worker.joinable()) {
      B.worker = std::thread([this] {
        Buffer& W = *buf_;
        for (;;) {
          std::vector<int64_t> rows;
          bool t = false;
          {
            std::unique_lock<std::mutex> lk(W.qmu);
            W.qcv.wait(lk, [&] { return W.stop || W.has_req; });
            if (W.stop) return;
            rows.swap(W.req);
            t = W.req_texts;
            W.has_req = false;
            W.busy = true;
          }
          try {  // errors surface when the rows are read for real
            noisy(rows);
            if (t) texts(rows);
          } catch (const std::exception&) {
          }
          {
            std::lock_guard<std::mutex> lk(W.qmu);
            W.busy = false;
          }
          W.qcv.notify_all();
        }
      });
    }
  }
  B.qcv.notify_all();
}

void NoisyCache::wait_prefetch() const {
  Buffer& B = *buf_;
  std::unique_lock<std::mutex> lk(B.qmu);
  B.qcv.wait(lk, [&] { return B.stop || (!B.busy && !B.has_req); });
}

CacheReadStats NoisyCache::read_stats() const {
  std::lock_guard<std::mutex> lk(buf_->mu);
  return buf_->stats;
}


}  // namespace daei
