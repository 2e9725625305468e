#include "data/cache.h"

#include <hdf5.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
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
#include "model/embedder.h"

namespace daei {
namespace fs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------------------------------------------------------
// HDF5 helpers

namespace {

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

void quiet_hdf5() {
  static bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
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
hid_t file_access() {
  static hid_t fapl = [] {
    hid_t p = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(p, H5F_LIBVER_V110, H5F_LIBVER_V110);
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(p, false, true);
#endif
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

// 1-d or 2-d chunked dataset with fletcher32, chunk ≈ 1 MB of rows.
void write_dataset(hid_t file, const char* name, hid_t file_type, hid_t mem_type, size_t elem, int64_t rows,
                   int64_t cols, const void* data) {
  const int rank = cols > 0 ? 2 : 1;
  hsize_t dims[2] = {hsize_t(rows), hsize_t(std::max<int64_t>(cols, 1))};
  int64_t row_bytes = int64_t(elem) * std::max<int64_t>(cols, 1);
  hsize_t chunk[2] = {hsize_t(std::clamp<int64_t>((1 << 20) / row_bytes, 1, rows)), dims[1]};
  Hid sp(H5Screate_simple(rank, dims, nullptr), H5Sclose);
  Hid dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_chunk(dcpl, rank, chunk);
  H5Pset_fletcher32(dcpl);
  H5Pset_obj_track_times(dcpl, false);
  Hid ds(H5Dcreate2(file, name, file_type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose);
  DAEI_CHECK(ds >= 0, "HDF5: cannot create dataset {} ({})", name, h5_error());
  DAEI_CHECK(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, "HDF5: cannot write dataset {} ({})",
             name, h5_error());
}

struct ShardMeta {
  std::string kind;  // "noisy" | "clean"
  std::string split, embedder, dtype, corpus_sha256;
  double sigma = 0;
  uint64_t noise_seed = 0;
  int64_t dim = 0, row_begin = 0, row_end = 0;
};

size_t elem_size(const std::string& dtype) { return dtype == "float16" ? 2 : 4; }

// Row serialisation for the content digest (see cache.h).
void hash_row(Sha256& h, int64_t id, const void* vec, size_t vec_bytes, const char* text, uint64_t len) {
  h.update(&id, 8);  // little-endian hosts only (x86-64, aarch64)
  h.update(vec, vec_bytes);
  h.update(&len, 8);
  h.update(text, len);
}

// Writes a complete shard under a temporary name, renames it into place; returns its content digest.
std::string write_shard(const std::string& path, const ShardMeta& m, const std::vector<int64_t>& ids,
                        const at::Tensor& vectors, const std::vector<std::string>& texts) {
  quiet_hdf5();
  const int64_t n = ids.size(), d = m.dim;
  DAEI_ASSERT(vectors.size(0) == n && vectors.size(1) == d && int64_t(texts.size()) == n, "shard shape");
  at::Tensor stored = (m.dtype == "float16" ? vectors.to(torch::kHalf) : vectors.to(torch::kFloat32)).contiguous();
  const size_t es = elem_size(m.dtype);
  std::vector<int64_t> offsets(n + 1, 0);
  for (int64_t i = 0; i < n; ++i) offsets[i + 1] = offsets[i] + int64_t(texts[i].size());
  std::string blob;
  blob.reserve(offsets[n]);
  for (auto& t : texts) blob += t;
  Sha256 h;
  const char* vp = static_cast<const char*>(stored.data_ptr());
  for (int64_t i = 0; i < n; ++i) hash_row(h, ids[i], vp + i * d * es, d * es, texts[i].data(), texts[i].size());
  const std::string digest = h.hex();
  if (blob.empty()) blob.push_back('\0');  // a dataset needs one element; text_offsets says 0 bytes are used

  const std::string tmp = temp_sibling(path);
  {
    Hid f(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, file_access()), H5Fclose);
    DAEI_CHECK(f >= 0, "cannot create {} ({})", tmp, h5_error());
    write_dataset(f, "ids", H5T_STD_I64LE, H5T_NATIVE_INT64, 8, n, 0, ids.data());
    hid_t vt = m.dtype == "float16" ? f16_type() : H5T_IEEE_F32LE;
    write_dataset(f, m.kind.c_str(), vt, vt, es, n, d, stored.data_ptr());
    write_dataset(f, "text", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, int64_t(blob.size()), 0, blob.data());
    write_dataset(f, "text_offsets", H5T_STD_I64LE, H5T_NATIVE_INT64, 8, n + 1, 0, offsets.data());
    Hid root(H5Gopen2(f, "/", H5P_DEFAULT), H5Gclose);
    attr_i64(root, "schema", kCacheSchema);
    attr_str(root, "kind", m.kind);
    attr_str(root, "split", m.split);
    attr_str(root, "embedder", m.embedder);
    attr_f64(root, "sigma", m.sigma);
    attr_i64(root, "noise_seed", int64_t(m.noise_seed));
    attr_i64(root, "dim", d);
    attr_str(root, "dtype", m.dtype);
    attr_i64(root, "row_begin", m.row_begin);
    attr_i64(root, "row_end", m.row_end);
    attr_str(root, "corpus_sha256", m.corpus_sha256);
    attr_str(root, "content_sha256", digest);
    attr_i64(root, "offline_eval_only", m.kind == "clean" ? 1 : 0);
    DAEI_CHECK(H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0, "cannot flush {}", tmp);
  }
  fs::rename(tmp, path);
  return digest;
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
  try {
    return json::parse(read_file(p));
  } catch (const json::exception& e) {
    DAEI_FAIL("{}: not valid JSON ({}); run `daei cache build` again", p, e.what());
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Reader

struct NoisyCache::Shard {
  std::string path;
  Hid file, vec, ids, text;
  int64_t begin = 0, end = 0;  // global rows
  std::vector<int64_t> offsets;
  hid_t mem_type = H5T_NATIVE_FLOAT;
  bool half = false;
};

namespace {

void check_eq(const std::string& path, const char* what, const std::string& got, const std::string& want) {
  DAEI_CHECK(got == want, "{}: {} is '{}' but the manifest says '{}' (a shard from another build: delete the cache "
             "folder and build again)", path, what, got, want);
}

}  // namespace

std::unique_ptr<NoisyCache> NoisyCache::open(const std::string& dir, const CacheExpect& expect) {
  return open_kind(dir, "noisy", expect);
}

std::unique_ptr<NoisyCache> NoisyCache::open_kind(const std::string& dir, const std::string& kind,
                                                  const CacheExpect& expect) {
  quiet_hdf5();
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
  std::unique_ptr<NoisyCache> c(new NoisyCache());
  c->dir_ = dir;
  c->rows_ = man.at("rows").get<int64_t>();
  c->dim_ = man.at("dim").get<int64_t>();
  c->sigma_ = man.at("sigma").get<double>();
  c->noise_seed_ = man.at("noise_seed").get<uint64_t>();
  c->embedder_ = man.at("embedder").get<std::string>();
  c->dtype_ = man.at("dtype").get<std::string>();
  DAEI_CHECK(man.at("schema").get<int>() == kCacheSchema, "{}: cache schema {} (this daei reads {})", dir,
             man.at("schema").get<int>(), kCacheSchema);
  if (!expect.embedder.empty())
    DAEI_CHECK(expect.embedder == c->embedder_, "{}: built by embedder '{}', expected '{}'", dir, c->embedder_,
               expect.embedder);
  if (expect.sigma >= 0)
    DAEI_CHECK(std::abs(expect.sigma - c->sigma_) <= 1e-12 * std::max(1.0, expect.sigma),
               "{}: built at sigma {}, expected {}", dir, c->sigma_, expect.sigma);
  if (expect.dim >= 0)
    DAEI_CHECK(expect.dim == c->dim_, "{}: dimension mismatch: cache has {}-d vectors, expected {}", dir, c->dim_,
               expect.dim);
  int64_t next = 0;
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
    Hid dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
    H5Pset_chunk_cache(dapl, 521, 16 << 20, 1.0);
    sh->vec = Hid(H5Dopen2(sh->file, kind.c_str(), dapl), H5Dclose);
    sh->ids = Hid(H5Dopen2(sh->file, "ids", H5P_DEFAULT), H5Dclose);
    sh->text = Hid(H5Dopen2(sh->file, "text", H5P_DEFAULT), H5Dclose);
    Hid offs(H5Dopen2(sh->file, "text_offsets", H5P_DEFAULT), H5Dclose);
    if (sh->vec < 0 || sh->ids < 0 || sh->text < 0 || offs < 0) fail_read(sh->path, "its datasets");
    {
      Hid sp(H5Dget_space(sh->vec), H5Sclose);
      hsize_t dims[2] = {0, 0};
      H5Sget_simple_extent_dims(sp, dims, nullptr);
      DAEI_CHECK(int64_t(dims[0]) == sh->end - sh->begin && int64_t(dims[1]) == c->dim_,
                 "{}: dimension mismatch: '{}' is [{}, {}], the manifest says [{}, {}]", sh->path, kind, dims[0],
                 dims[1], sh->end - sh->begin, c->dim_);
    }
    sh->offsets.resize(sh->end - sh->begin + 1);
    if (H5Dread(offs, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, sh->offsets.data()) < 0)
      fail_read(sh->path, "text_offsets");
    sh->half = c->dtype_ == "float16";
    c->shards_.push_back(std::move(sh));
  }
  DAEI_CHECK(next == c->rows_, "{}: shards cover {} rows, the manifest says {}", dir, next, c->rows_);
  return c;
}

NoisyCache::~NoisyCache() = default;

namespace {

// Reads sorted local rows [rows] of a 2-d dataset into out (row-major float32 [rows.size(), d]).
void read_rows(const NoisyCache::Shard& sh, hid_t ds, const std::vector<int64_t>& rows, int64_t d, bool half,
               float* out, const char* what);

}  // namespace

at::Tensor NoisyCache::noisy_range(int64_t begin, int64_t end) const {
  DAEI_CHECK(0 <= begin && begin <= end && end <= rows_, "{}: rows [{}, {}) outside [0, {})", dir_, begin, end, rows_);
  std::vector<int64_t> idx(end - begin);
  for (int64_t i = begin; i < end; ++i) idx[i - begin] = i;
  return noisy(idx);
}

at::Tensor NoisyCache::noisy(const std::vector<int64_t>& idx) const {
  std::lock_guard<std::mutex> lk(mu_);
  const int64_t n = idx.size();
  at::Tensor out = torch::empty({n, dim_}, torch::kFloat32);
  // order of idx → (shard, local row), read shard by shard in sorted order, scatter back
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) {
    DAEI_CHECK(idx[i] >= 0 && idx[i] < rows_, "{}: row {} outside [0, {})", dir_, idx[i], rows_);
    order[i] = i;
  }
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return idx[a] < idx[b]; });
  std::vector<float> buf;
  size_t s = 0;
  for (int64_t i = 0; i < n;) {
    while (idx[order[i]] >= shards_[s]->end) ++s;
    const Shard& sh = *shards_[s];
    std::vector<int64_t> local;
    std::vector<int64_t> dest;
    int64_t j = i;
    for (; j < n && idx[order[j]] < sh.end; ++j) {
      local.push_back(idx[order[j]] - sh.begin);
      dest.push_back(order[j]);
    }
    buf.resize(local.size() * dim_);
    read_rows(sh, sh.vec, local, dim_, sh.half, buf.data(), "noisy rows");
    float* o = out.data_ptr<float>();
    for (size_t k = 0; k < dest.size(); ++k)
      std::memcpy(o + dest[k] * dim_, buf.data() + k * dim_, dim_ * sizeof(float));
    i = j;
  }
  return out;
}

namespace {

void read_rows(const NoisyCache::Shard& sh, hid_t ds, const std::vector<int64_t>& rows, int64_t d, bool half,
               float* out, const char* what) {
  if (rows.empty()) return;
  Hid fsp(H5Dget_space(ds), H5Sclose);
  H5Sselect_none(fsp);
  // runs of consecutive rows (duplicates are read once per occurrence)
  size_t i = 0;
  while (i < rows.size()) {
    size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    hsize_t start[2] = {hsize_t(rows[i]), 0}, count[2] = {hsize_t(j - i), hsize_t(d)};
    if (rows[i] == (i ? rows[i - 1] : -1)) {
      // a repeated row: HDF5 selections are sets, so read it separately below
      break;
    }
    H5Sselect_hyperslab(fsp, H5S_SELECT_OR, start, nullptr, count, nullptr);
    i = j;
  }
  if (i < rows.size()) {  // repeats present: simple row-at-a-time path
    for (size_t k = 0; k < rows.size(); ++k) read_rows(sh, ds, {rows[k]}, d, half, out + k * d, what);
    return;
  }
  hsize_t mdims[2] = {hsize_t(rows.size()), hsize_t(d)};
  Hid msp(H5Screate_simple(2, mdims, nullptr), H5Sclose);
  if (half) {
    at::Tensor h = torch::empty({int64_t(rows.size()), d}, torch::kHalf);
    if (H5Dread(ds, f16_type(), msp, fsp, H5P_DEFAULT, h.data_ptr()) < 0) fail_read(sh.path, what);
    at::Tensor f = h.to(torch::kFloat32);
    std::memcpy(out, f.data_ptr<float>(), rows.size() * d * sizeof(float));
  } else {
    if (H5Dread(ds, H5T_NATIVE_FLOAT, msp, fsp, H5P_DEFAULT, out) < 0) fail_read(sh.path, what);
  }
}

std::string read_text(const NoisyCache::Shard& sh, int64_t local) {
  int64_t a = sh.offsets[local], b = sh.offsets[local + 1];
  std::string s(b - a, '\0');
  if (b == a) return s;
  Hid fsp(H5Dget_space(sh.text), H5Sclose);
  hsize_t start = a, count = b - a;
  H5Sselect_hyperslab(fsp, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
  Hid msp(H5Screate_simple(1, &count, nullptr), H5Sclose);
  if (H5Dread(sh.text, H5T_NATIVE_UINT8, msp, fsp, H5P_DEFAULT, s.data()) < 0) fail_read(sh.path, "text");
  return s;
}

}  // namespace

std::vector<std::string> NoisyCache::texts(const std::vector<int64_t>& idx) const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::string> out;
  out.reserve(idx.size());
  for (int64_t g : idx) {
    DAEI_CHECK(g >= 0 && g < rows_, "{}: row {} outside [0, {})", dir_, g, rows_);
    auto it = std::upper_bound(shards_.begin(), shards_.end(), g,
                               [](int64_t v, const std::unique_ptr<Shard>& s) { return v < s->end; });
    out.push_back(read_text(**it, g - (*it)->begin));
  }
  return out;
}

std::vector<int64_t> NoisyCache::ids(const std::vector<int64_t>& idx) const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<int64_t> out;
  for (int64_t g : idx) {
    DAEI_CHECK(g >= 0 && g < rows_, "{}: row {} outside [0, {})", dir_, g, rows_);
    auto it = std::upper_bound(shards_.begin(), shards_.end(), g,
                               [](int64_t v, const std::unique_ptr<Shard>& s) { return v < s->end; });
    const Shard& sh = **it;
    Hid fsp(H5Dget_space(sh.ids), H5Sclose);
    hsize_t start = g - sh.begin, count = 1;
    H5Sselect_hyperslab(fsp, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
    Hid msp(H5Screate_simple(1, &count, nullptr), H5Sclose);
    int64_t v;
    if (H5Dread(sh.ids, H5T_NATIVE_INT64, msp, fsp, H5P_DEFAULT, &v) < 0) fail_read(sh.path, "ids");
    out.push_back(v);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Clean reader (offline evaluation only)

std::unique_ptr<CleanCache> CleanCache::open(const std::string& cache_dir, OfflineEvalOnly) {
  std::unique_ptr<CleanCache> c(new CleanCache());
  c->impl_ = NoisyCache::open_kind(cache_dir + "/clean", "clean", {});
  return c;
}

CleanCache::~CleanCache() = default;
int64_t CleanCache::size() const { return impl_->size(); }
int64_t CleanCache::dim() const { return impl_->dim(); }
at::Tensor CleanCache::clean(const std::vector<int64_t>& idx) const { return impl_->noisy(idx); }
at::Tensor CleanCache::all_clean() const { return impl_->all_noisy(); }
std::vector<std::string> CleanCache::texts(const std::vector<int64_t>& idx) const { return impl_->texts(idx); }

// ---------------------------------------------------------------------------------------------------------------
// Build

CacheBuildOptions CacheBuildOptions::from_config(const Config& cfg, const std::string& run_dir,
                                                 const std::string& split) {
  CacheBuildOptions o;
  o.split = split;
  o.corpus_file = run_dir + "/corpus/" + split + ".jsonl";
  o.cache_dir = run_dir + "/cache/" + split;
  o.shard_rows = cfg.integer("cache.shard_rows");
  o.batch_size = cfg.integer("cache.batch_size");
  o.dtype = cfg.str("cache.dtype");
  o.clean_train_reference = cfg.flag("cache.clean_train_reference");
  o.max_rows_per_s = cfg.real("cache.max_rows_per_s");
  return o;
}

namespace {

struct Plan {
  std::string error;                 // non-empty: every rank throws it
  bool noisy_done = false, clean_done = false;
  int64_t rows = 0, dim = 0;
  std::string corpus_sha;
  std::vector<int64_t> noisy_todo, clean_todo;
};

json plan_json(const Plan& p) {
  return json{{"error", p.error}, {"noisy_done", p.noisy_done}, {"clean_done", p.clean_done}, {"rows", p.rows},
              {"dim", p.dim}, {"corpus_sha", p.corpus_sha}, {"noisy_todo", p.noisy_todo},
              {"clean_todo", p.clean_todo}};
}
Plan plan_from(const json& j) {
  Plan p;
  p.error = j["error"];
  p.noisy_done = j["noisy_done"];
  p.clean_done = j["clean_done"];
  p.rows = j["rows"];
  p.dim = j["dim"];
  p.corpus_sha = j["corpus_sha"];
  p.noisy_todo = j["noisy_todo"].get<std::vector<int64_t>>();
  p.clean_todo = j["clean_todo"].get<std::vector<int64_t>>();
  return p;
}

// Is an existing complete shard the one this build would write? Mismatch → an error naming the file.
bool shard_matches(const std::string& path, const ShardMeta& want) {
  Hid f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, file_access()), H5Fclose);
  if (f < 0) {
    LOG_WARN("[cache] {} cannot be opened ({}): building it again", path, h5_error());
    return false;
  }
  Hid root(H5Gopen2(f, "/", H5P_DEFAULT), H5Gclose);
  auto s = [&](const char* k) { return read_attr_str(root, k, path); };
  DAEI_CHECK(s("embedder") == want.embedder && read_attr_f64(root, "sigma", path) == want.sigma &&
                 uint64_t(read_attr_i64(root, "noise_seed", path)) == want.noise_seed,
             "{} was built by embedder '{}' at sigma {}; the config asks for '{}' at sigma {}: use another run.name "
             "or delete {} (nothing was overwritten)",
             path, s("embedder"), read_attr_f64(root, "sigma", path), want.embedder, want.sigma,
             fs::path(path).parent_path().string());
  DAEI_CHECK(read_attr_i64(root, "dim", path) == want.dim, "{}: dimension mismatch: {}-d, the embedder gives {}-d",
             path, read_attr_i64(root, "dim", path), want.dim);
  DAEI_CHECK(s("dtype") == want.dtype && s("corpus_sha256") == want.corpus_sha256 &&
                 read_attr_i64(root, "row_begin", path) == want.row_begin &&
                 read_attr_i64(root, "row_end", path) == want.row_end,
             "{} was built from another corpus, dtype or shard size: delete {} and build again (nothing was "
             "overwritten)", path, fs::path(path).parent_path().string());
  return true;
}

// One pass over the corpus file: its SHA-256 and its number of lines (= rows).
std::pair<std::string, int64_t> hash_and_count_lines(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  DAEI_CHECK(f, "cannot read corpus file {}: {}", path, std::strerror(errno));
  Sha256 h;
  std::vector<char> buf(1 << 20);
  int64_t lines = 0;
  char last = '\n';
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) {
    h.update(buf.data(), n);
    lines += std::count(buf.data(), buf.data() + n, '\n');
    last = buf[n - 1];
  }
  DAEI_CHECK(!std::ferror(f.get()), "read error on {}", path);
  if (last != '\n') ++lines;
  return {h.hex(), lines};
}

void remove_temps(const std::string& dir) {
  if (!fs::is_directory(dir)) return;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) {
      LOG_INFO("[cache] removing partial {}", e.path().string());
      fs::remove(e.path());
    }
}

json make_manifest(const std::string& dir, const ShardMeta& base, int64_t rows, int64_t shard_rows, int world) {
  json shards = json::array();
  int64_t n_shards = (rows + shard_rows - 1) / shard_rows;
  for (int64_t s = 0; s < n_shards; ++s) {
    const std::string p = dir + "/" + shard_name(s);
    ShardMeta want = base;
    want.row_begin = s * shard_rows;
    want.row_end = std::min(rows, (s + 1) * shard_rows);
    DAEI_CHECK(file_exists(p), "{}: shard missing after the build (a rank failed?)", p);
    shard_matches(p, want);
    Hid f(H5Fopen(p.c_str(), H5F_ACC_RDONLY, file_access()), H5Fclose);
    Hid root(H5Gopen2(f, "/", H5P_DEFAULT), H5Gclose);
    shards.push_back({{"file", shard_name(s)}, {"rows", want.row_end - want.row_begin},
                      {"row_begin", want.row_begin}, {"row_end", want.row_end},
                      {"content_sha256", read_attr_str(root, "content_sha256", p)}});
  }
  return json{{"schema", kCacheSchema}, {"kind", base.kind}, {"split", base.split}, {"rows", rows},
              {"dim", base.dim}, {"dtype", base.dtype}, {"embedder", base.embedder}, {"sigma", base.sigma},
              {"noise_seed", base.noise_seed}, {"corpus_sha256", base.corpus_sha256}, {"shard_rows", shard_rows},
              {"offline_eval_only", base.kind == "clean"}, {"written_by_world_size", world}, {"shards", shards}};
}

bool manifest_complete(const std::string& dir, const ShardMeta& base, int64_t rows, int64_t shard_rows) {
  const std::string p = dir + "/manifest.json";
  if (!file_exists(p)) return false;
  json m = json::parse(read_file(p));
  const bool same = m.value("embedder", "") == base.embedder && m.value("sigma", -1.0) == base.sigma &&
                    m.value("noise_seed", uint64_t(0)) == base.noise_seed && m.value("dtype", "") == base.dtype &&
                    m.value("corpus_sha256", "") == base.corpus_sha256 && m.value("rows", int64_t(-1)) == rows &&
                    m.value("shard_rows", int64_t(-1)) == shard_rows && m.value("dim", int64_t(-1)) == base.dim;
  DAEI_CHECK(same, "{} describes another build (embedder '{}', sigma {}, dtype {}, {} rows, corpus {}…); the config "
             "asks for '{}', sigma {}, dtype {}, {} rows, corpus {}…: use another run.name or delete {} (nothing was "
             "overwritten)", p, m.value("embedder", ""), m.value("sigma", -1.0), m.value("dtype", ""),
             m.value("rows", int64_t(-1)), m.value("corpus_sha256", "").substr(0, 12), base.embedder, base.sigma,
             base.dtype, rows, base.corpus_sha256.substr(0, 12), dir);
  return true;
}

}  // namespace

CacheBuildResult build_cache(const CacheBuildOptions& opt, const NoisyEmbedder& emb, Communicator& comm) {
  quiet_hdf5();
  auto t0 = std::chrono::steady_clock::now();
  const int rank = comm.rank(), world = comm.size();
  DAEI_CHECK(opt.shard_rows > 0 && opt.batch_size > 0, "cache.shard_rows and cache.batch_size must be > 0");
  DAEI_CHECK(opt.dtype == "float16" || opt.dtype == "float32", "cache.dtype must be float16 or float32, got '{}'",
             opt.dtype);
  const std::string clean_dir = opt.cache_dir + "/clean";
  ShardMeta base{"noisy", opt.split, emb.id(), opt.dtype, "", emb.sigma(), emb.seed(), 0, 0, 0};

  // Rank 0 checks and plans; every rank gets the plan (or the error) by broadcast.
  Plan plan;
  if (rank == 0) {
    try {
      DAEI_CHECK(!opt.clean || opt.split != "train" || opt.clean_train_reference,
                 "clean embeddings of the training split are outside the threat model (the attack sees only noisy "
                 "embeddings); they are built only for the clean-to-clean reference: set "
                 "cache.clean_train_reference=true to ask for them");
      DAEI_CHECK(!opt.clean || emb.adds_noise(), "--clean needs a local embedder: {} is a remote noisy release",
                 emb.id());
      DAEI_CHECK(file_exists(opt.corpus_file), "cannot read corpus file {} (run `daei corpus build` first)",
                 opt.corpus_file);
      std::tie(plan.corpus_sha, plan.rows) = hash_and_count_lines(opt.corpus_file);
      DAEI_CHECK(plan.rows > 0, "corpus file {} has no rows", opt.corpus_file);
      plan.dim = emb.dim();
      base.corpus_sha256 = plan.corpus_sha;
      base.dim = plan.dim;
      ShardMeta cbase = clean_meta(base);
      plan.noisy_done = manifest_complete(opt.cache_dir, base, plan.rows, opt.shard_rows);
      plan.clean_done = !opt.clean || manifest_complete(clean_dir, cbase, plan.rows, opt.shard_rows);
      remove_temps(opt.cache_dir);
      remove_temps(clean_dir);
      const int64_t n_shards = (plan.rows + opt.shard_rows - 1) / opt.shard_rows;
      for (int64_t s = 0; s < n_shards; ++s) {
        ShardMeta w = base;
        w.row_begin = s * opt.shard_rows;
        w.row_end = std::min(plan.rows, (s + 1) * opt.shard_rows);
        const std::string p = opt.cache_dir + "/" + shard_name(s);
        if (!plan.noisy_done && !(file_exists(p) && shard_matches(p, w))) plan.noisy_todo.push_back(s);
        ShardMeta cw = clean_meta(w);
        const std::string cp = clean_dir + "/" + shard_name(s);
        if (!plan.clean_done && !(file_exists(cp) && shard_matches(cp, cw))) plan.clean_todo.push_back(s);
      }
    } catch (const std::exception& e) {
      plan.error = e.what();
    }
  }
  plan = plan_from(json::parse(comm.broadcast(rank == 0 ? plan_json(plan).dump() : std::string(), 0)));
  if (!plan.error.empty()) {
    if (rank == 0) throw Error(plan.error);
    comm.barrier();  // rank 0 reports; the others wait to be torn down with it
    throw Error(plan.error);
  }
  base.corpus_sha256 = plan.corpus_sha;
  base.dim = plan.dim;
  CacheBuildResult res;
  res.rows = plan.rows;
  res.shards = (plan.rows + opt.shard_rows - 1) / opt.shard_rows;
  if (plan.noisy_done && plan.clean_done) {
    res.already_complete = true;
    LOG_INFO("[cache] {}: complete ({} rows, {} shards); nothing to do", opt.cache_dir, res.rows, res.shards);
    return res;
  }
  make_dirs(opt.cache_dir);
  if (opt.clean) make_dirs(clean_dir);

  // My shards: round-robin over the union of what is left to do.
  std::vector<int64_t> todo;
  std::set_union(plan.noisy_todo.begin(), plan.noisy_todo.end(), plan.clean_todo.begin(), plan.clean_todo.end(),
                 std::back_inserter(todo));
  std::vector<int64_t> mine;
  for (size_t i = 0; i < todo.size(); ++i)
    if (int(i % world) == rank) mine.push_back(todo[i]);
  auto in = [](const std::vector<int64_t>& v, int64_t s) { return std::binary_search(v.begin(), v.end(), s); };
  int64_t my_rows = 0;
  for (int64_t s : mine) my_rows += std::min(plan.rows, (s + 1) * opt.shard_rows) - s * opt.shard_rows;
  int64_t todo_rows = 0;
  for (int64_t s : todo) todo_rows += std::min(plan.rows, (s + 1) * opt.shard_rows) - s * opt.shard_rows;
  LOG_INFO("[cache] {}: {} rows in {} shards; {} shards to build over {} ranks ({} kept)", opt.cache_dir, plan.rows,
           res.shards, todo.size(), world, res.shards - int64_t(todo.size()));

  Progress progress(fmt::format("cache {}", opt.split), my_rows, "rows", 10.0);
  int64_t done_rows = 0;
  auto rate_t0 = std::chrono::steady_clock::now();
  size_t next = 0;  // index into mine
  std::vector<int64_t> ids;
  std::vector<std::string> texts;
  std::future<void> pending;
  auto flush_shard = [&](int64_t s) {
    ShardMeta w = base;
    w.row_begin = s * opt.shard_rows;
    w.row_end = w.row_begin + int64_t(ids.size());
    const int64_t n = ids.size();
    at::Tensor noisy = torch::empty({n, plan.dim}, torch::kFloat32);
    at::Tensor clean = opt.clean ? torch::empty({n, plan.dim}, torch::kFloat32) : at::Tensor();
    for (int64_t b = 0; b < n; b += opt.batch_size) {
      int64_t e = std::min(n, b + opt.batch_size);
      std::vector<std::string> bt(texts.begin() + b, texts.begin() + e), keys;
      for (int64_t i = b; i < e; ++i) keys.push_back(opt.split + "/" + std::to_string(ids[i]));
      if (opt.clean) {
        auto [c, y] = emb.embed_with_clean(bt, keys);
        noisy.slice(0, b, e).copy_(y);
        clean.slice(0, b, e).copy_(c);
      } else {
        noisy.slice(0, b, e).copy_(emb.embed(bt, keys));
      }
      DAEI_CHECK(noisy.size(1) == plan.dim, "embedder returned {}-d vectors, expected {}", noisy.size(1), plan.dim);
      done_rows += e - b;
      if (opt.max_rows_per_s > 0) {
        double ahead = done_rows / opt.max_rows_per_s -
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - rate_t0).count();
        if (ahead > 0) std::this_thread::sleep_for(std::chrono::duration<double>(ahead));
      }
      progress.update(done_rows);
    }
    // Written on a background thread while the next shard is embedded (one write in flight; the main thread does
    // not touch HDF5 meanwhile, so the serial library is used by one thread at a time).
    if (pending.valid()) pending.get();
    const bool want_noisy = in(plan.noisy_todo, s), want_clean = in(plan.clean_todo, s);
    pending = std::async(std::launch::async, [=, &opt, ids = std::move(ids), texts = std::move(texts)] {
      if (want_noisy) write_shard(opt.cache_dir + "/" + shard_name(s), w, ids, noisy, texts);
      if (want_clean) write_shard(clean_dir + "/" + shard_name(s), clean_meta(w), ids, clean, texts);
    });
    ++res.shards_built;
    ids.clear();
    texts.clear();
  };
  if (!mine.empty()) {
    for_each_corpus_row(opt.corpus_file, [&](int64_t row, int64_t id, std::string text) {
      if (next >= mine.size()) return;
      const int64_t s = row / opt.shard_rows;
      if (s != mine[next]) return;
      ids.push_back(id);
      texts.push_back(std::move(text));
      if (row + 1 == std::min(plan.rows, (s + 1) * opt.shard_rows)) {
        flush_shard(s);
        ++next;
      }
    });
    if (pending.valid()) pending.get();
    DAEI_CHECK(next == mine.size(), "{} changed while the cache was built (fewer rows than planned)", opt.corpus_file);
  }
  comm.barrier();
  if (rank == 0) {
    if (!plan.noisy_done)
      write_file_atomic(opt.cache_dir + "/manifest.json",
                        make_manifest(opt.cache_dir, base, plan.rows, opt.shard_rows, world).dump(1) + "\n");
    if (opt.clean && !plan.clean_done) {
      ShardMeta cbase = clean_meta(base);
      write_file_atomic(clean_dir + "/manifest.json",
                        make_manifest(clean_dir, cbase, plan.rows, opt.shard_rows, world).dump(1) + "\n");
    }
  }
  comm.barrier();
  res.rows_built = todo_rows;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  LOG_INFO("[cache] {}: done, {} rows ({} built in this run) in {:.1f} s", opt.cache_dir, res.rows, res.rows_built,
           res.seconds);
  return res;
}

// ---------------------------------------------------------------------------------------------------------------
// Verify

VerifyResult verify_cache(const std::string& cache_dir, bool clean) {
  quiet_hdf5();
  const std::string dir = clean ? cache_dir + "/clean" : cache_dir;
  const std::string split = fs::path(cache_dir).filename().string();
  json man = read_manifest(dir, split);
  const std::string kind = clean ? "clean" : "noisy";
  DAEI_CHECK(man.value("kind", "") == kind, "{}: manifest kind '{}', expected '{}'", dir, man.value("kind", ""), kind);
  VerifyResult r;
  r.rows = man.at("rows");
  r.dim = man.at("dim");
  r.dtype = man.at("dtype");
  r.embedder = man.at("embedder");
  r.sigma = man.at("sigma");
  const size_t es = elem_size(r.dtype);
  Sha256 total;
  int64_t next = 0;
  for (const auto& s : man.at("shards")) {
    const std::string path = dir + "/" + s.at("file").get<std::string>();
    DAEI_CHECK(file_exists(path), "{}: shard missing — run `daei cache build --split {}` again", path, split);
    Hid f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, file_access()), H5Fclose);
    if (f < 0) fail_read(path, "the file");
    Hid root(H5Gopen2(f, "/", H5P_DEFAULT), H5Gclose);
    if (root < 0) fail_read(path, "the root group");
    const int64_t b = s.at("row_begin"), e = s.at("row_end"), n = e - b;
    DAEI_CHECK(b == next, "{}: manifest rows are not contiguous at {}", dir, path);
    next = e;
    DAEI_CHECK(read_attr_i64(root, "schema", path) == man.at("schema").get<int64_t>(), "{}: schema differs", path);
    DAEI_CHECK(read_attr_f64(root, "sigma", path) == r.sigma, "{}: sigma is {} but the manifest says {}", path,
               read_attr_f64(root, "sigma", path), r.sigma);
    check_eq(path, "embedder", read_attr_str(root, "embedder", path), r.embedder);
    DAEI_CHECK(read_attr_i64(root, "dim", path) == r.dim, "{}: dimension mismatch: {}-d, the manifest says {}-d",
               path, read_attr_i64(root, "dim", path), r.dim);
    check_eq(path, "dtype", read_attr_str(root, "dtype", path), r.dtype);
    DAEI_CHECK(read_attr_i64(root, "row_begin", path) == b && read_attr_i64(root, "row_end", path) == e,
               "{}: row range differs from the manifest", path);
    DAEI_CHECK(read_attr_i64(root, "offline_eval_only", path) == (clean ? 1 : 0),
               "{}: offline_eval_only marker is wrong for a {} cache", path, kind);
    auto read_all = [&](const char* name, hid_t mt, void* out) {
      Hid ds(H5Dopen2(f, name, H5P_DEFAULT), H5Dclose);
      if (ds < 0 || H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) fail_read(path, name);
    };
    std::vector<int64_t> ids(n), offs(n + 1);
    std::vector<char> vec(n * r.dim * es);
    read_all("ids", H5T_NATIVE_INT64, ids.data());
    read_all(kind.c_str(), r.dtype == "float16" ? f16_type() : H5T_NATIVE_FLOAT, vec.data());
    read_all("text_offsets", H5T_NATIVE_INT64, offs.data());
    std::vector<char> blob(std::max<int64_t>(offs[n], 1));
    {
      Hid ds(H5Dopen2(f, "text", H5P_DEFAULT), H5Dclose);
      Hid sp(H5Dget_space(ds), H5Sclose);
      DAEI_CHECK(H5Sget_simple_extent_npoints(sp) == int64_t(blob.size()), "{}: text size differs from its offsets",
                 path);
      if (H5Dread(ds, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, blob.data()) < 0) fail_read(path, "text");
    }
    Sha256 h;
    for (int64_t i = 0; i < n; ++i) {
      DAEI_CHECK(offs[i] <= offs[i + 1] && offs[i + 1] <= offs[n], "{}: text_offsets are not increasing", path);
      const char* v = vec.data() + i * r.dim * es;
      hash_row(h, ids[i], v, r.dim * es, blob.data() + offs[i], offs[i + 1] - offs[i]);
      hash_row(total, ids[i], v, r.dim * es, blob.data() + offs[i], offs[i + 1] - offs[i]);
    }
    const std::string digest = h.hex();
    DAEI_CHECK(digest == s.at("content_sha256").get<std::string>() &&
                   digest == read_attr_str(root, "content_sha256", path),
               "{}: checksum error: content SHA-256 {} differs from the manifest's {}: the shard is damaged; delete it "
               "and run `daei cache build` again", path, digest.substr(0, 16),
               s.at("content_sha256").get<std::string>().substr(0, 16));
    ++r.shards;
  }
  DAEI_CHECK(next == r.rows, "{}: shards cover {} rows, the manifest says {}", dir, next, r.rows);
  r.digest = total.hex();
  return r;
}

}  // namespace daei
