// The cache files' HDF5 layer: handles, attributes, shard writing, the manifest reader and the corpus check.
#include "data/cache_shard.h"
#include "data/cache_manifest.h"

#include <hdf5.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <future>
#include <thread>
#include <tuple>
#include <cerrno>
#include <cstdio>
#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/sha256.h"
#include "data/corpus.h"
#include "dist/communicator.h"
#include "model/release/embedder.h"

namespace daei {
namespace fs = std::filesystem;
using nlohmann::json;


// ---------------------------------------------------------------------------------------------------------------
// HDF5 helpers

namespace cache_detail {

// HDF5's automatic error printing is per thread in a thread-safe build (Debian's): turn it off in every thread
// that calls HDF5 (shards are written on a std::async thread), or a failure prints ~100 lines of stack.
void quiet_hdf5() {
  thread_local bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

std::recursive_mutex& hdf5_mutex() {
  quiet_hdf5();
  // recursive: a failed open() unwinds (and closes its shards under this lock) while it still holds it
  static std::recursive_mutex m;
  return m;
}

void check_eq(const std::string& path, const char* what, const std::string& got, const std::string& want) {
  DAEI_CHECK(got == want, "{}: {} is '{}' but the manifest says '{}' (a shard from another build: delete the cache "
             "folder and build again)", path, what, got, want);
}

// The current HDF5 error stack as one line (innermost descriptions), then cleared.
std::string h5_error() {
  std::vector<std::string> msgs;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        auto* v = static_cast<std::vector<std::string>*>(data);
        if (e->desc && *e->desc && (v->empty() || v->back() != e->desc)) v->push_back(e->desc);
        return 0;
      },
      &msgs);
  H5Eclear2(H5E_DEFAULT);
  std::string s;
  for (size_t i = 0; i < msgs.size() && i < 4; ++i) s += (i ? "; " : "") + msgs[i];
  return s.empty() ? "unknown HDF5 error" : s;
}

bool looks_like_checksum(const std::string& e) {
  return e.find("checksum") != std::string::npos || e.find("filter") != std::string::npos ||
         e.find("pipeline") != std::string::npos;
}

[[noreturn]] void fail_read(const std::string& path, const std::string& what) {
  std::string e = h5_error();
  if (looks_like_checksum(e))
    DAEI_FAIL("{}: checksum error reading {} ({}): the shard is damaged; delete it and run `daei cache build` "
              "again to rebuild it", path, what, e);
  DAEI_FAIL("{}: cannot read {} ({}): the shard is damaged or not a daei cache shard", path, what, e);
}

// File access: the 1.10 format (checksummed metadata) and no file locks. A shard is written by one rank under a
// temporary name and only read after its rename, so locks buy nothing, and on cluster file systems (Lustre, NFS)
// HDF5's flock fails ("unable to lock file").
// Every shard of a cache stays open while a stage reads it, and HDF5 keeps a metadata cache per open file (the chunk
// index of each dataset, read as rows are touched), which by default adapts between 1 and 32 MB a file: with random
// rows read over many epochs, each file's cache fills towards its bound, a cost that grows with the number of shards.
// Fixed at kMetadataCacheBytes a file instead (no adaptive resizing): a chunk index entry read again is re-read from
// the page cache, which costs less than the rows' own reads.
hid_t file_access() {
  static hid_t fapl = [] {
    hid_t p = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(p, H5F_LIBVER_V110, H5F_LIBVER_V110);
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(p, false, true);
#endif
    H5AC_cache_config_t mdc;
    mdc.version = H5AC__CURR_CACHE_CONFIG_VERSION;
    if (H5Pget_mdc_config(p, &mdc) >= 0) {
      mdc.set_initial_size = true;
      mdc.initial_size = kMetadataCacheBytes;
      mdc.min_size = kMetadataCacheBytes;
      mdc.max_size = kMetadataCacheBytes;
      mdc.incr_mode = H5C_incr__off;
      mdc.flash_incr_mode = H5C_flash_incr__off;
      mdc.decr_mode = H5C_decr__off;
      mdc.min_clean_fraction = 0.3;
      H5Pset_mdc_config(p, &mdc);
    }
    return p;
  }();
  return fapl;
}

hid_t f16_type() {
  static hid_t t = [] {
    hid_t x = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(x, 15, 10, 5, 0, 10);
    H5Tset_size(x, 2);
    H5Tset_ebias(x, 15);
    return x;
  }();
  return t;
}

void attr_str(hid_t obj, const char* name, const std::string& v) {
  Hid t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t, std::max<size_t>(1, v.size()));
  H5Tset_cset(t, H5T_CSET_UTF8);
  Hid sp(H5Screate(H5S_SCALAR), H5Sclose);
  Hid a(H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  DAEI_CHECK(a >= 0 && H5Awrite(a, t, v.empty() ? "" : v.data()) >= 0, "HDF5: cannot write attribute {}", name);
}
void attr_i64(hid_t obj, const char* name, int64_t v) {
  Hid sp(H5Screate(H5S_SCALAR), H5Sclose);
  Hid a(H5Acreate2(obj, name, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  DAEI_CHECK(a >= 0 && H5Awrite(a, H5T_NATIVE_INT64, &v) >= 0, "HDF5: cannot write attribute {}", name);
}
void attr_f64(hid_t obj, const char* name, double v) {
  Hid sp(H5Screate(H5S_SCALAR), H5Sclose);
  Hid a(H5Acreate2(obj, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  DAEI_CHECK(a >= 0 && H5Awrite(a, H5T_NATIVE_DOUBLE, &v) >= 0, "HDF5: cannot write attribute {}", name);
}

bool has_attr(hid_t obj, const char* name) { return H5Aexists(obj, name) > 0; }

std::string read_attr_str(hid_t obj, const char* name, const std::string& path) {
  Hid a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  if (a < 0) fail_read(path, fmt::format("attribute '{}'", name));
  Hid t(H5Aget_type(a), H5Tclose);
  size_t n = H5Tget_size(t);
  std::string s(n, '\0');
  Hid mt(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(mt, n);
  H5Tset_cset(mt, H5T_CSET_UTF8);
  if (H5Aread(a, mt, s.data()) < 0) fail_read(path, fmt::format("attribute '{}'", name));
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}
int64_t read_attr_i64(hid_t obj, const char* name, const std::string& path) {
  Hid a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  int64_t v = 0;
  if (a < 0 || H5Aread(a, H5T_NATIVE_INT64, &v) < 0) fail_read(path, fmt::format("attribute '{}'", name));
  return v;
}
double read_attr_f64(hid_t obj, const char* name, const std::string& path) {
  Hid a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  double v = 0;
  if (a < 0 || H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0) fail_read(path, fmt::format("attribute '{}'", name));
  return v;
}

// A dataset written front to back keeps two chunks in HDF5's chunk cache (the default holds 1 MB, 16 chunks of
// 64 KB, written only when evicted or at close): a chunk goes to the file soon after it is filled, so a shard's
// close has little left to write.
Hid streaming_access(int64_t chunk_bytes) {
  Hid dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
  H5Pset_chunk_cache(dapl, 521, size_t(2 * chunk_bytes + 4096), 1.0);
  return dapl;
}

// 1-d or 2-d chunked dataset with fletcher32, chunk ≈ chunk_bytes of rows (cache.chunk_kb). The reader reads
// whole chunks (fletcher32 covers a chunk), so the chunk size is what one random row costs to read.
Hid create_dataset(hid_t file, const char* name, hid_t file_type, size_t elem, int64_t rows, int64_t cols,
                   int64_t chunk_bytes) {
  const int rank = cols > 0 ? 2 : 1;
  hsize_t dims[2] = {hsize_t(rows), hsize_t(std::max<int64_t>(cols, 1))};
  int64_t row_bytes = int64_t(elem) * std::max<int64_t>(cols, 1);
  hsize_t chunk[2] = {hsize_t(std::clamp<int64_t>(chunk_bytes / row_bytes, 1, rows)), dims[1]};
  Hid sp(H5Screate_simple(rank, dims, nullptr), H5Sclose);
  Hid dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_chunk(dcpl, rank, chunk);
  H5Pset_fletcher32(dcpl);
  H5Pset_obj_track_times(dcpl, false);
  Hid ds(H5Dcreate2(file, name, file_type, sp, H5P_DEFAULT, dcpl, streaming_access(chunk_bytes)), H5Dclose);
  DAEI_CHECK(ds >= 0, "HDF5: cannot create dataset {} ({})", name, h5_error());
  return ds;
}

// Rows [row0, row0 + rows) of a dataset created above (cols 0: 1-d).
void write_rows(hid_t ds, const char* name, hid_t mem_type, int64_t row0, int64_t rows, int64_t cols,
                const void* data) {
  const int rank = cols > 0 ? 2 : 1;
  hsize_t start[2] = {hsize_t(row0), 0}, count[2] = {hsize_t(rows), hsize_t(std::max<int64_t>(cols, 1))};
  Hid file_space(H5Dget_space(ds), H5Sclose);
  Hid mem_space(H5Screate_simple(rank, count, nullptr), H5Sclose);
  DAEI_CHECK(H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, nullptr, count, nullptr) >= 0 &&
                 H5Dwrite(ds, mem_type, mem_space, file_space, H5P_DEFAULT, data) >= 0,
             "HDF5: cannot write dataset {} ({})", name, h5_error());
}

void write_dataset(hid_t file, const char* name, hid_t file_type, hid_t mem_type, size_t elem, int64_t rows,
                   int64_t cols, const void* data, int64_t chunk_bytes) {
  Hid ds = create_dataset(file, name, file_type, elem, rows, cols, chunk_bytes);
  DAEI_CHECK(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, "HDF5: cannot write dataset {} ({})",
             name, h5_error());
}

size_t elem_size(const std::string& dtype) { return dtype == "float16" ? 2 : 4; }

// Row serialisation for the content digest (see cache.h).
void hash_row(Sha256& h, int64_t id, const void* vec, size_t vec_bytes, const char* text, uint64_t len) {
  h.update(&id, 8);  // little-endian hosts only (x86-64, aarch64)
  h.update(vec, vec_bytes);
  h.update(&len, 8);
  h.update(text, len);
}

namespace {
// Bytes a dataset of rows × row_bytes takes on disk: whole chunks (create_dataset: chunk_bytes of rows, + 4 bytes of
// fletcher32 a chunk). The bytes of the rows alone underestimated a 10,000-row shard by a quarter, and the write then
// failed inside HDF5 instead of at the free-space check.
uint64_t stored_bytes(int64_t rows, int64_t row_bytes, int64_t chunk_bytes) {
  const int64_t r = std::max<int64_t>(rows, 1), cr = std::clamp<int64_t>(chunk_bytes / row_bytes, 1, r);
  return uint64_t((r + cr - 1) / cr) * uint64_t(cr * row_bytes + 4);
}
}  // namespace

ShardStream::ShardStream(std::string path, ShardMeta m, int64_t rows)
    : path_(std::move(path)), tmp_(temp_sibling(path_)), m_(std::move(m)), rows_(rows), elem_(elem_size(m_.dtype)) {
  quiet_hdf5();
  DAEI_ASSERT(rows_ >= 0 && m_.dim > 0, "shard shape");
  offsets_.reserve(rows_ + 1);
  offsets_.push_back(0);
  // Room for the rows' datasets (+ ~64 KB of metadata and chunk indexes)? A full disk is caught here, before HDF5 is
  // half-way through a file, in the common case; the texts' bytes are checked the same way at close(); a failure
  // inside HDF5 ends the same way.
  check_space(stored_bytes(rows_, 8, m_.chunk_bytes) + stored_bytes(rows_, m_.dim * int64_t(elem_), m_.chunk_bytes) +
              stored_bytes(rows_ + 1, 8, m_.chunk_bytes) + (64 << 10));
  guarded([&] {
    f_ = Hid(H5Fcreate(tmp_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, file_access()), H5Fclose);
    DAEI_CHECK(f_ >= 0, "cannot create {} ({})", tmp_, h5_error());
    ids_ = create_dataset(f_, "ids", H5T_STD_I64LE, 8, rows_, 0, m_.chunk_bytes);
    vectors_ = create_dataset(f_, m_.kind.c_str(), m_.dtype == "float16" ? f16_type() : H5T_IEEE_F32LE, elem_, rows_,
                              m_.dim, m_.chunk_bytes);
  });
}

ShardStream::~ShardStream() {
  if (!closed_) abandon();
}

void ShardStream::abandon() {
  failed_ = true;
  vectors_.reset();
  ids_.reset();
  f_.reset();
  std::error_code ec;
  fs::remove(tmp_, ec);
}

void ShardStream::check_space(uint64_t need) const {
  struct statvfs vfs {};
  const std::string dir = fs::path(path_).parent_path().string();
  if (::statvfs(dir.empty() ? "." : dir.c_str(), &vfs) == 0) {
    const uint64_t avail = uint64_t(vfs.f_bavail) * vfs.f_frsize;
    if (avail < need)
      DAEI_FAIL("{}: no space left on device (the shard needs about {:.1f} MB, {:.1f} MB are free)", path_, need / 1e6,
                avail / 1e6);
  }
}

void ShardStream::guarded(const std::function<void()>& step) {
  DAEI_CHECK(!failed_ && !closed_, "{}: the shard's write already ended", path_);
  try {
    errno = 0;
    step();
  } catch (const std::exception& e) {
    const int err = errno;  // before the closes and the removal below, which may set it
    const std::string what = e.what();
    abandon();
    const bool enospc = err == ENOSPC || what.find("No space left") != std::string::npos;
    if (enospc) DAEI_FAIL("{}: no space left on device (writing {})", path_, tmp_);
    DAEI_FAIL("{}: cannot write shard: {}", path_, what);
  }
}

void ShardStream::append(const int64_t* ids, const at::Tensor& vectors, const std::string* texts) {
  const int64_t n = vectors.size(0), d = m_.dim;
  DAEI_ASSERT(vectors.dim() == 2 && vectors.size(1) == d && written_ + n <= rows_, "shard shape");
  if (n == 0) return;
  const at::Tensor stored =
      (m_.dtype == "float16" ? vectors.to(torch::kHalf) : vectors.to(torch::kFloat32)).contiguous();
  const char* vp = static_cast<const char*>(stored.data_ptr());
  for (int64_t i = 0; i < n; ++i) {
    hash_row(digest_, ids[i], vp + i * d * elem_, d * elem_, texts[i].data(), texts[i].size());
    blob_ += texts[i];
    offsets_.push_back(int64_t(blob_.size()));
  }
  guarded([&] {
    write_rows(ids_, "ids", H5T_NATIVE_INT64, written_, n, 0, ids);
    write_rows(vectors_, m_.kind.c_str(), m_.dtype == "float16" ? f16_type() : H5T_NATIVE_FLOAT, written_, n, d, vp);
  });
  written_ += n;
}

std::string ShardStream::close() {
  DAEI_ASSERT(written_ == rows_, "shard {}: {} of {} rows appended", path_, written_, rows_);
  const std::string digest = digest_.hex();
  if (blob_.empty()) blob_.push_back('\0');  // a dataset needs one element; text_offsets says 0 bytes are used
  try {
    check_space(stored_bytes(int64_t(blob_.size()), 1, m_.chunk_bytes) + (64 << 10));
  } catch (...) {
    abandon();
    throw;
  }
  guarded([&] {
    vectors_.reset();  // the rows' last chunks are written here (and may meet a full disk)
    ids_.reset();
    // The texts in one dataset of their total size, known only now: chunks of at most chunk_bytes (a dataset grown
    // batch by batch would pad its last chunk to chunk_bytes, which a small shard would be mostly made of).
    write_dataset(f_, "text", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, int64_t(blob_.size()), 0, blob_.data(),
                  m_.chunk_bytes);
    write_dataset(f_, "text_offsets", H5T_STD_I64LE, H5T_NATIVE_INT64, 8, rows_ + 1, 0, offsets_.data(),
                  m_.chunk_bytes);
    {
      Hid root(H5Gopen2(f_, "/", H5P_DEFAULT), H5Gclose);
      attr_i64(root, "schema", kCacheSchema);
      attr_str(root, "kind", m_.kind);
      attr_str(root, "split", m_.split);
      attr_str(root, "embedder", m_.embedder);
      attr_f64(root, "sigma", m_.sigma);
      attr_i64(root, "noise_seed", int64_t(m_.noise_seed));
      attr_i64(root, "dim", m_.dim);
      attr_str(root, "dtype", m_.dtype);
      attr_i64(root, "row_begin", m_.row_begin);
      attr_i64(root, "row_end", m_.row_end);
      attr_str(root, "corpus_sha256", m_.corpus_sha256);
      attr_str(root, "content_sha256", digest);
      attr_i64(root, "offline_eval_only", m_.kind == "clean" ? 1 : 0);
    }
    DAEI_CHECK(H5Fflush(f_, H5F_SCOPE_GLOBAL) >= 0, "cannot flush {} ({})", tmp_, h5_error());
    const hid_t id = f_.id;
    f_.id = -1;  // closed here, once, with its result checked (a second H5Fclose of a failed file crashed at exit)
    DAEI_CHECK(H5Fclose(id) >= 0, "cannot close {} ({})", tmp_, h5_error());
  });
  std::error_code ec;
  fs::rename(tmp_, path_, ec);
  if (ec) {
    const std::string why = ec.message();  // the rename's error (the removal below resets ec)
    abandon();
    DAEI_FAIL("{}: cannot rename the written shard into place: {}", path_, why);
  }
  closed_ = true;
  return digest;
}

std::string write_shard(const std::string& path, const ShardMeta& m, const std::vector<int64_t>& ids,
                        const at::Tensor& vectors, const std::vector<std::string>& texts) {
  const int64_t n = ids.size();
  DAEI_ASSERT(vectors.size(0) == n && int64_t(texts.size()) == n, "shard shape");
  ShardStream s(path, m, n);
  s.append(ids.data(), vectors, texts.data());
  return s.close();
}

namespace {
// The corpus file in blocks of 1 MB, in order; its number of lines (= rows; a last line without its newline counts).
int64_t read_lines_in_blocks(const std::string& path, const std::function<void(const char*, size_t)>& block) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  DAEI_CHECK(f, "cannot read corpus file {}: {}", path, std::strerror(errno));
  std::unique_ptr<char[]> buf(new char[1 << 20]);  // not zeroed: fread fills what is used
  int64_t lines = 0;
  char last = '\n';
  size_t n;
  while ((n = std::fread(buf.get(), 1, 1 << 20, f.get())) > 0) {
    if (block) block(buf.get(), n);
    for (const char *p = buf.get(), *e = p + n; (p = static_cast<const char*>(std::memchr(p, '\n', e - p))); ++p)
      ++lines;
    last = buf[n - 1];
  }
  DAEI_CHECK(!std::ferror(f.get()), "read error on {}", path);
  if (last != '\n') ++lines;
  return lines;
}
}  // namespace

int64_t count_lines(const std::string& path) { return read_lines_in_blocks(path, nullptr); }

std::pair<std::string, int64_t> hash_and_count_lines(const std::string& path) {
  Sha256 h;
  const int64_t lines = read_lines_in_blocks(path, [&](const char* p, size_t n) { h.update(p, n); });
  return {h.hex(), lines};
}

void check_covers_corpus(const std::string& dir, const nlohmann::json& man, const std::string& corpus_file,
                         const std::string& split, bool clean) {
  if (corpus_file == "-") return;
  std::string cf = corpus_file;
  if (cf.empty()) {  // the run's corpus by the folder layout
    fs::path run = fs::path(dir).parent_path().parent_path();
    if (clean) run = run.parent_path();
    cf = (run / "corpus" / (split + ".jsonl")).string();
  }
  if (!file_exists(cf)) {
    DAEI_CHECK(corpus_file.empty(), "{}: cannot read corpus file {} to check the cache against it", dir, cf);
    return;
  }
  const std::string want_sha = man.value("corpus_sha256", "");
  const int64_t want_rows = man.value("rows", int64_t(-1));
  const auto [sha, rows] = hash_and_count_lines(cf);
  DAEI_CHECK(sha == want_sha, "{}: built from another corpus (corpus_sha256 {}…) than {} (SHA-256 {}…): the corpus "
             "changed after the cache was built; run `daei cache build --split {}` again into a new run or delete {}",
             dir, want_sha.substr(0, 12), cf, sha.substr(0, 12), split, dir);
  DAEI_CHECK(rows == want_rows, "{}: the manifest lists {} rows but the corpus {} has {}: the cache does not cover "
             "its corpus; run `daei cache build --split {}` again", dir, want_rows, cf, rows, split);
}

std::string shard_name(int64_t s) { return fmt::format("shard-{:05d}.h5", s); }

// Clean shards: same rows, dataset "clean", always float32, marked offline_eval_only.
ShardMeta clean_meta(ShardMeta m) {
  m.kind = "clean";
  m.dtype = "float32";
  return m;
}

json read_manifest(const std::string& dir, const std::string& split_hint) {
  const std::string p = dir + "/manifest.json";
  if (!file_exists(p))
    DAEI_FAIL("{}: incomplete: manifest.json missing — run `daei cache build --split {}` again to resume", dir,
              split_hint);
  return parse_cache_manifest(read_file(p), p);
}

}  // namespace cache_detail
}  // namespace daei
