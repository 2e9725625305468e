#include "data/cache.h"
#include "data/cache_shard.h"

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

using namespace cache_detail;

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
