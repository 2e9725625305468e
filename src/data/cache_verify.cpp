// `daei cache verify`: every shard of a cache read back whole (fletcher32 on read), its content digest recomputed,
// its attributes checked against the manifest.
#include "data/cache.h"

#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fields.h"
#include "core/fsutil.h"
#include "core/sha256.h"
#include "data/cache_shard.h"

namespace daei {
namespace fs = std::filesystem;
using nlohmann::json;

using namespace cache_detail;

VerifyResult verify_cache(const std::string& cache_dir, bool clean) {
  quiet_hdf5();
  std::lock_guard<std::recursive_mutex> hl(hdf5_mutex());
  const std::string dir = clean ? cache_dir + "/clean" : cache_dir;
  const std::string split = fs::path(cache_dir).filename().string();
  json man = read_manifest(dir, split);
  const std::string kind = clean ? "clean" : "noisy";
  DAEI_CHECK(man.value("kind", "") == kind, "{}: manifest kind '{}', expected '{}'", dir, man.value("kind", ""), kind);
  check_covers_corpus(dir, man, "", split, clean);  // the run's corpus, when it has one (hyp-train has none)
  VerifyResult r;
  read_json_fields(r, man, dir + "/manifest.json");  // every field is there: read_manifest checked them
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
