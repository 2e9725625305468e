#include "data/cache.h"
#include "data/cache_shard.h"
#include "data/cache_manifest.h"

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
#include "core/dir_lock.h"
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
  o.chunk_kb = cfg.integer("cache.chunk_kb");
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

// Reads a whole dataset (fletcher32 checks every chunk on the way) into bytes; its dimensions into dims.
std::vector<char> read_whole(hid_t f, const std::string& name, hid_t mem_type, size_t elem, std::vector<hsize_t>& dims,
                             const std::string& path) {
  Hid ds(H5Dopen2(f, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (ds < 0) fail_read(path, "dataset '" + name + "'");
  Hid sp(H5Dget_space(ds), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(sp);
  if (rank < 1 || rank > 2) fail_read(path, "the shape of dataset '" + name + "'");
  dims.assign(rank, 0);
  H5Sget_simple_extent_dims(sp, dims.data(), nullptr);
  size_t count = 1;
  for (auto d : dims) count *= d;
  DAEI_CHECK(count < (size_t(1) << 34), "{}: dataset '{}' claims {} elements", path, name, count);
  std::vector<char> buf(std::max<size_t>(1, count * elem));
  if (H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0) fail_read(path, "dataset '" + name + "'");
  return buf;
}

// The whole content of a shard read back and its digest recomputed against the stored content_sha256: "" when
// intact, else what is wrong (truncated file, flipped bytes caught by fletcher32 or by the digest).
std::string shard_damage(const std::string& path, const ShardMeta& want) {
  try {
    Hid f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, file_access()), H5Fclose);
    if (f < 0) return "cannot be opened (" + h5_error() + ")";
    Hid root(H5Gopen2(f, "/", H5P_DEFAULT), H5Gclose);
    if (root < 0) return "no root group (" + h5_error() + ")";
    const std::string kind = read_attr_str(root, "kind", path), dtype = read_attr_str(root, "dtype", path);
    const std::string stored_digest = read_attr_str(root, "content_sha256", path);
    if (kind != want.kind) return "holds '" + kind + "' vectors, not '" + want.kind + "'";
    if (dtype != "float16" && dtype != "float32") return "unknown dtype '" + dtype + "'";
    const size_t es = elem_size(dtype);
    std::vector<hsize_t> di, dv, dt, doff;
    auto ids = read_whole(f, "ids", H5T_NATIVE_INT64, 8, di, path);
    auto vec = read_whole(f, kind, dtype == "float16" ? f16_type() : H5T_NATIVE_FLOAT, es, dv, path);
    auto text = read_whole(f, "text", H5T_NATIVE_UINT8, 1, dt, path);
    auto off = read_whole(f, "text_offsets", H5T_NATIVE_INT64, 8, doff, path);
    const int64_t n = int64_t(di[0]);
    if (dv.size() != 2 || int64_t(dv[0]) != n || doff[0] != hsize_t(n + 1)) return "dataset shapes disagree";
    const size_t d = dv[1];
    const auto* o = reinterpret_cast<const int64_t*>(off.data());
    const auto* id = reinterpret_cast<const int64_t*>(ids.data());
    Sha256 h;
    for (int64_t i = 0; i < n; ++i) {
      if (o[i] < 0 || o[i + 1] < o[i] || uint64_t(o[i + 1]) > dt[0]) return "text offsets out of range";
      hash_row(h, id[i], vec.data() + i * d * es, d * es, text.data() + o[i], uint64_t(o[i + 1] - o[i]));
    }
    if (h.hex() != stored_digest) return "content digest " + h.hex().substr(0, 12) + "… differs from the stored " +
                                         stored_digest.substr(0, 12) + "…";
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
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
  json m;
  try {
    m = parse_cache_manifest(read_file(p), p);
  } catch (const std::exception& e) {
    // Shards are checked one by one below (identity, then every byte), so nothing is lost by rebuilding it.
    LOG_WARN("[cache] {}; treating the cache as incomplete: every shard is verified, damaged ones rebuilt",
             e.what());
    return false;
  }
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
  DAEI_CHECK(opt.chunk_kb > 0, "cache.chunk_kb must be > 0");
  ShardMeta base{"noisy", opt.split, emb.id(), opt.dtype, "", emb.sigma(), emb.seed(), 0, 0, 0};
  base.chunk_bytes = opt.chunk_kb << 10;

  // A shard left by an earlier (interrupted) build is kept only when all of it reads back and its digest matches
  // (the cost of a full `cache verify` of that shard); a damaged one is logged and built again.
  int64_t damaged_shards = 0;
  auto keep_shard = [&](const std::string& p, const ShardMeta& w) {
    if (!file_exists(p)) return false;
    const std::string damage = shard_damage(p, w);
    if (!damage.empty()) {
      LOG_WARN("[cache] {} is damaged ({}): building it again", p, damage);
      ++damaged_shards;
      return false;
    }
    return shard_matches(p, w);  // intact but from another build: refuse (nothing overwritten)
  };
  // Rank 0 checks the request, locks the split folder (as the training stages lock theirs: a second build of the
  // split is refused, naming its host and PID, before it removes anything) and plans; every rank gets the plan (or
  // the error) by broadcast.
  Plan plan;
  DirLock lock;
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
      lock = DirLock(opt.cache_dir);  // after the checks above, which refuse without creating anything
      if (opt.on_locked) opt.on_locked();
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
        if (!plan.noisy_done && !keep_shard(p, w)) plan.noisy_todo.push_back(s);
        ShardMeta cw = clean_meta(w);
        const std::string cp = clean_dir + "/" + shard_name(s);
        if (!plan.clean_done && !keep_shard(cp, cw)) plan.clean_todo.push_back(s);
      }
    } catch (const std::exception& e) {
      plan.error = e.what();
    }
  }
  plan = plan_from(json::parse(comm.broadcast(rank == 0 ? plan_json(plan).dump() : std::string(), 0)));
  // Every rank throws the same error: main sees that all ranks failed and rank 0 alone prints it.
  if (!plan.error.empty()) throw Error(plan.error);
  if (rank == 0 && damaged_shards > 0)
    LOG_WARN("[cache] {}: {} damaged shard(s) will be built again", opt.cache_dir, damaged_shards);
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

}  // namespace daei
