// The one cache writer: plan, broadcast, shard assignment, shard writes, manifest (see cache_writer.h).
#include "data/cache_writer.h"

#include <hdf5.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>
#include <tuple>
#include <torch/torch.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/sha256.h"
#include "data/cache_manifest.h"
#include "data/cache_shard.h"
#include "dist/communicator.h"
#include "model/release/embedder.h"

namespace daei {
namespace fs = std::filesystem;
using nlohmann::json;

using namespace cache_detail;

namespace {

struct Plan {
  std::string error;                 // non-empty: every rank throws it
  bool noisy_done = false, clean_done = false;
  bool digest_later = false;         // corpus_sha is computed on the writer's thread (a fresh build, see plan())
  int64_t rows = 0, dim = 0;
  std::string corpus_sha;
  std::vector<int64_t> noisy_todo, clean_todo;
};

json plan_json(const Plan& p) {
  return json{{"error", p.error}, {"noisy_done", p.noisy_done}, {"clean_done", p.clean_done},
              {"digest_later", p.digest_later}, {"rows", p.rows},
              {"dim", p.dim}, {"corpus_sha", p.corpus_sha}, {"noisy_todo", p.noisy_todo},
              {"clean_todo", p.clean_todo}};
}
Plan plan_from(const json& j) {
  Plan p;
  p.error = j["error"];
  p.noisy_done = j["noisy_done"];
  p.clean_done = j["clean_done"];
  p.digest_later = j["digest_later"];
  p.rows = j["rows"];
  p.dim = j["dim"];
  p.corpus_sha = j["corpus_sha"];
  p.noisy_todo = j["noisy_todo"].get<std::vector<int64_t>>();
  p.clean_todo = j["clean_todo"].get<std::vector<int64_t>>();
  return p;
}

// Is an existing complete shard the one this build would write? Mismatch → an error naming the file.
bool shard_matches(const std::string& path, const ShardMeta& want, const CacheWriterOptions& opt) {
  Hid f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, file_access()), H5Fclose);
  if (f < 0) {
    LOG_WARN("[{}] {} cannot be opened ({}): building it again", opt.log_tag, path, h5_error());
    return false;
  }
  Hid root(H5Gopen2(f, "/", H5P_DEFAULT), H5Gclose);
  auto s = [&](const char* k) { return read_attr_str(root, k, path); };
  if (opt.other_build) {
    const bool same = s("embedder") == want.embedder && read_attr_f64(root, "sigma", path) == want.sigma &&
                      uint64_t(read_attr_i64(root, "noise_seed", path)) == want.noise_seed &&
                      read_attr_i64(root, "dim", path) == want.dim && s("dtype") == want.dtype &&
                      s("corpus_sha256") == want.corpus_sha256 && read_attr_i64(root, "row_begin", path) == want.row_begin &&
                      read_attr_i64(root, "row_end", path) == want.row_end;
    DAEI_CHECK(same, "{}", opt.other_build(path, fs::path(path).parent_path().string()));
    return true;
  }
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

// Nothing of an earlier build in dir (no manifest, no shard; partial temporary files do not count).
bool nothing_built(const std::string& dir) {
  if (!fs::is_directory(dir)) return true;
  for (auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.find(".tmp-") == std::string::npos && (n == "manifest.json" || n.rfind("shard-", 0) == 0)) return false;
  }
  return true;
}

void remove_temps(const std::string& dir, const std::string& tag) {
  if (!fs::is_directory(dir)) return;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) {
      LOG_INFO("[{}] removing partial {}", tag, e.path().string());
      fs::remove(e.path());
    }
}

// The manifest schema (cache.h), written here alone.
json make_manifest(const std::string& dir, const ShardMeta& base, int64_t rows, const CacheWriterOptions& opt,
                   int world) {
  const int64_t shard_rows = opt.shard_rows;
  json shards = json::array();
  int64_t n_shards = (rows + shard_rows - 1) / shard_rows;
  for (int64_t s = 0; s < n_shards; ++s) {
    const std::string p = dir + "/" + shard_name(s);
    ShardMeta want = base;
    want.row_begin = s * shard_rows;
    want.row_end = std::min(rows, (s + 1) * shard_rows);
    DAEI_CHECK(file_exists(p), "{}: shard missing after the build (a rank failed?)", p);
    shard_matches(p, want, opt);
    Hid f(H5Fopen(p.c_str(), H5F_ACC_RDONLY, file_access()), H5Fclose);
    Hid root(H5Gopen2(f, "/", H5P_DEFAULT), H5Gclose);
    shards.push_back({{"file", shard_name(s)}, {"rows", want.row_end - want.row_begin},
                      {"row_begin", want.row_begin}, {"row_end", want.row_end},
                      {"content_sha256", read_attr_str(root, "content_sha256", p)}});
  }
  json m{{"schema", kCacheSchema}, {"kind", base.kind}, {"split", base.split}, {"rows", rows},
         {"dim", base.dim}, {"dtype", base.dtype}, {"embedder", base.embedder}, {"sigma", base.sigma},
         {"noise_seed", base.noise_seed}, {"corpus_sha256", base.corpus_sha256}, {"shard_rows", shard_rows},
         {"offline_eval_only", base.kind == "clean"}, {"written_by_world_size", world}, {"shards", shards}};
  if (base.kind == "noisy")
    for (const auto& [k, v] : opt.manifest_extra.items()) m[k] = v;
  return m;
}

bool manifest_complete(const std::string& dir, const ShardMeta& base, int64_t rows, const CacheWriterOptions& opt) {
  const int64_t shard_rows = opt.shard_rows;
  const std::string p = dir + "/manifest.json";
  if (!file_exists(p)) return false;
  json m;
  try {
    m = parse_cache_manifest(read_file(p), p);
  } catch (const std::exception& e) {
    // Shards are checked one by one below (identity, then every byte), so nothing is lost by rebuilding it.
    LOG_WARN("[{}] {}; treating the cache as incomplete: every shard is verified, damaged ones rebuilt", opt.log_tag,
             e.what());
    return false;
  }
  const bool same = m.value("embedder", "") == base.embedder && m.value("sigma", -1.0) == base.sigma &&
                    m.value("noise_seed", uint64_t(0)) == base.noise_seed && m.value("dtype", "") == base.dtype &&
                    m.value("corpus_sha256", "") == base.corpus_sha256 && m.value("rows", int64_t(-1)) == rows &&
                    m.value("shard_rows", int64_t(-1)) == shard_rows && m.value("dim", int64_t(-1)) == base.dim;
  if (opt.other_build) DAEI_CHECK(same, "{}", opt.other_build(p, dir));
  DAEI_CHECK(same, "{} describes another build (embedder '{}', sigma {}, dtype {}, {} rows, corpus {}…); the config "
             "asks for '{}', sigma {}, dtype {}, {} rows, corpus {}…: use another run.name or delete {} (nothing was "
             "overwritten)", p, m.value("embedder", ""), m.value("sigma", -1.0), m.value("dtype", ""),
             m.value("rows", int64_t(-1)), m.value("corpus_sha256", "").substr(0, 12), base.embedder, base.sigma,
             base.dtype, rows, base.corpus_sha256.substr(0, 12), dir);
  return true;
}

// One background thread that runs the shard writes in the order given, a few jobs ahead at most (memory stays at
// a few batches). A job's error is kept and thrown to the producer at its next submit() or at drain(); the jobs
// after it are dropped. Without a thread (overlap off) a job runs in the caller.
class WriteQueue {
 public:
  explicit WriteQueue(bool background, size_t max_queued = 8) : max_queued_(max_queued) {
    if (background) thread_ = std::thread([this] { run(); });
  }
  ~WriteQueue() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void submit(std::function<void()> job) {
    if (!thread_.joinable()) return job();
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return queue_.size() < max_queued_ || error_; });
    rethrow(l);
    queue_.push_back(std::move(job));
    cv_.notify_all();
  }
  void drain() {  // every job submitted has run
    if (!thread_.joinable()) return;
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return (queue_.empty() && !busy_) || error_; });
    rethrow(l);
  }

 private:
  void rethrow(std::unique_lock<std::mutex>&) {
    if (!error_) return;
    std::exception_ptr e = error_;
    error_ = nullptr;  // thrown once; the jobs queued after it were dropped
    std::rethrow_exception(e);
  }
  void run() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return !queue_.empty() || stop_; });
      if (queue_.empty()) return;  // stop_ and nothing left
      std::function<void()> job = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      l.unlock();
      std::exception_ptr err;
      try {
        job();
      } catch (...) {
        err = std::current_exception();
      }
      job = nullptr;  // what the job held (tensors, texts) is freed outside the lock
      l.lock();
      busy_ = false;
      if (err) {
        error_ = err;
        queue_.clear();
      }
      cv_.notify_all();
    }
  }
  size_t max_queued_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::exception_ptr error_;
  bool busy_ = false, stop_ = false;
};

}  // namespace

CacheWriterOptions cache_writer_options(const NoisyEmbedder& emb, const std::string& dir, const std::string& split,
                                        const std::string& dtype, int64_t shard_rows) {
  CacheWriterOptions o;
  o.dir = dir;
  o.split = split;
  o.embedder = emb.id();
  o.dtype = dtype;
  o.sigma = emb.sigma();
  o.noise_seed = emb.seed();
  o.shard_rows = shard_rows;
  return o;
}

struct CacheWriter::State {
  CacheWriterOptions opt;
  Communicator& comm;
  std::string clean_dir;
  ShardMeta base;
  Plan plan;
  std::vector<int64_t> todo, mine;
  // The shard being written, touched only by the write queue's jobs (HDF5 on one thread). Declared before the
  // queue, so the queue's thread has ended when they are destroyed (an unfinished shard's temporary file removed).
  std::unique_ptr<ShardStream> noisy_stream, clean_stream;
  std::string later_digest;  // plan.digest_later: the source's digest, set by the queue's first job
  int64_t shard = -1;  // begun and not ended on the producer's side
  std::unique_ptr<WriteQueue> queue;
  State(CacheWriterOptions o, Communicator& c) : opt(std::move(o)), comm(c) {}
};

CacheWriter::CacheWriter(CacheWriterOptions opt, Communicator& comm)
    : st_(std::make_unique<State>(std::move(opt), comm)) {
  quiet_hdf5();
  const auto& o = st_->opt;
  st_->clean_dir = o.dir + "/clean";
  st_->base = ShardMeta{"noisy", o.split, o.embedder, o.dtype, "", o.sigma, o.noise_seed, 0, 0, 0};
  st_->base.chunk_bytes = o.chunk_kb << 10;
  st_->queue = std::make_unique<WriteQueue>(o.overlap_writes);
}

CacheWriter::~CacheWriter() {
  if (!st_) return;
  st_->queue.reset();  // the jobs already queued run (an error among them is dropped: already unwinding), the thread ends
}

bool CacheWriter::plan(const std::function<CacheSource()>& describe,
                       const std::function<std::string()>& source_digest) {
  State& S = *st_;
  const auto& opt = S.opt;
  const int rank = S.comm.rank(), world = S.comm.size();
  Plan& plan = S.plan;
  // A shard left by an earlier (interrupted) build is kept only when all of it reads back and its digest matches
  // (the cost of a full `cache verify` of that shard); a damaged one is logged and built again.
  int64_t damaged_shards = 0;
  auto keep_shard = [&](const std::string& p, const ShardMeta& w) {
    if (!file_exists(p)) return false;
    const std::string damage = shard_damage(p, w);
    if (!damage.empty()) {
      LOG_WARN("[{}] {} is damaged ({}): building it again", opt.log_tag, p, damage);
      ++damaged_shards;
      return false;
    }
    return shard_matches(p, w, opt);  // intact but from another build: refuse (nothing overwritten)
  };
  if (rank == 0) {
    try {
      const CacheSource src = describe();
      plan.rows = src.rows;
      plan.dim = src.dim;
      // A fresh build does not wait for the source's digest: nothing on disk is compared with it, and the shards
      // and manifests that store it are written later, so every rank computes it on the writer's thread while the
      // first rows are produced (finish() checks that the ranks agree). Otherwise it is needed now, to tell which
      // files of the earlier build are this build's.
      plan.digest_later = source_digest && opt.overlap_writes && nothing_built(opt.dir) &&
                          (!opt.clean || nothing_built(S.clean_dir));
      plan.corpus_sha = source_digest ? (plan.digest_later ? std::string() : source_digest()) : src.sha256;
      S.base.corpus_sha256 = plan.corpus_sha;
      S.base.dim = plan.dim;
      ShardMeta cbase = clean_meta(S.base);
      plan.noisy_done = manifest_complete(opt.dir, S.base, plan.rows, opt);
      plan.clean_done = !opt.clean || manifest_complete(S.clean_dir, cbase, plan.rows, opt);
      remove_temps(opt.dir, opt.log_tag);
      remove_temps(S.clean_dir, opt.log_tag);
      for (int64_t s = 0; s < shards(); ++s) {
        ShardMeta w = S.base;
        w.row_begin = shard_begin(s);
        w.row_end = shard_end(s);
        if (!plan.noisy_done && !keep_shard(opt.dir + "/" + shard_name(s), w)) plan.noisy_todo.push_back(s);
        if (!plan.clean_done && !keep_shard(S.clean_dir + "/" + shard_name(s), clean_meta(w)))
          plan.clean_todo.push_back(s);
      }
    } catch (const std::exception& e) {
      plan.error = e.what();
    }
  }
  plan = plan_from(json::parse(S.comm.broadcast(rank == 0 ? plan_json(plan).dump() : std::string(), 0)));
  // Every rank throws the same error: main sees that all ranks failed and rank 0 alone prints it.
  if (!plan.error.empty()) throw Error(plan.error);
  if (rank == 0 && damaged_shards > 0)
    LOG_WARN("[{}] {}: {} damaged shard(s) will be built again", opt.log_tag, opt.dir, damaged_shards);
  S.base.corpus_sha256 = plan.corpus_sha;
  S.base.dim = plan.dim;
  if (plan.noisy_done && plan.clean_done) return false;
  if (plan.digest_later) S.queue->submit([&S, source_digest] { S.later_digest = source_digest(); });
  make_dirs(opt.dir);
  if (opt.clean) make_dirs(S.clean_dir);
  // My shards: round-robin over the union of what is left to do.
  std::set_union(plan.noisy_todo.begin(), plan.noisy_todo.end(), plan.clean_todo.begin(), plan.clean_todo.end(),
                 std::back_inserter(S.todo));
  for (size_t i = 0; i < S.todo.size(); ++i)
    if (int(i % world) == rank) S.mine.push_back(S.todo[i]);
  return true;
}

int64_t CacheWriter::rows() const { return st_->plan.rows; }
int64_t CacheWriter::dim() const { return st_->plan.dim; }
const std::string& CacheWriter::source_sha256() const { return st_->plan.corpus_sha; }
int64_t CacheWriter::shards() const { return (st_->plan.rows + st_->opt.shard_rows - 1) / st_->opt.shard_rows; }
const std::vector<int64_t>& CacheWriter::todo() const { return st_->todo; }
const std::vector<int64_t>& CacheWriter::mine() const { return st_->mine; }
int64_t CacheWriter::shard_begin(int64_t s) const { return s * st_->opt.shard_rows; }
int64_t CacheWriter::shard_end(int64_t s) const { return std::min(st_->plan.rows, (s + 1) * st_->opt.shard_rows); }
int64_t CacheWriter::rows_of(const std::vector<int64_t>& shards) const {
  int64_t n = 0;
  for (int64_t s : shards) n += shard_end(s) - shard_begin(s);
  return n;
}

void CacheWriter::begin(int64_t s) {
  State& S = *st_;
  DAEI_ASSERT(S.shard < 0, "shard {} begun before shard {} ended", s, S.shard);
  S.shard = s;
  ShardMeta w = S.base;
  w.row_begin = shard_begin(s);
  w.row_end = shard_end(s);
  auto in = [](const std::vector<int64_t>& v, int64_t x) { return std::binary_search(v.begin(), v.end(), x); };
  const bool want_noisy = in(S.plan.noisy_todo, s), want_clean = in(S.plan.clean_todo, s);
  const std::string noisy_path = S.opt.dir + "/" + shard_name(s), clean_path = S.clean_dir + "/" + shard_name(s);
  const int64_t n = w.row_end - w.row_begin;
  S.queue->submit([&S, w, n, want_noisy, want_clean, noisy_path, clean_path]() mutable {
    quiet_hdf5();
    if (S.plan.digest_later) w.corpus_sha256 = S.later_digest;  // set by an earlier job of this thread
    if (want_noisy) S.noisy_stream = std::make_unique<ShardStream>(noisy_path, w, n);
    if (want_clean) S.clean_stream = std::make_unique<ShardStream>(clean_path, clean_meta(w), n);
  });
}

void CacheWriter::append(std::vector<int64_t> ids, at::Tensor noisy, at::Tensor clean, std::vector<std::string> texts) {
  State& S = *st_;
  DAEI_ASSERT(S.shard >= 0, "rows appended outside a shard");
  DAEI_ASSERT(noisy.size(0) == int64_t(ids.size()) && int64_t(texts.size()) == int64_t(ids.size()), "batch shape");
  S.queue->submit([&S, ids = std::move(ids), noisy = std::move(noisy), clean = std::move(clean),
                   texts = std::move(texts)] {
    if (S.noisy_stream) S.noisy_stream->append(ids.data(), noisy, texts.data());
    if (S.clean_stream) S.clean_stream->append(ids.data(), clean, texts.data());
  });
}

void CacheWriter::end() {
  State& S = *st_;
  DAEI_ASSERT(S.shard >= 0, "no shard to end");
  S.shard = -1;
  S.queue->submit([&S] {
    if (S.noisy_stream) S.noisy_stream->close();
    if (S.clean_stream) S.clean_stream->close();
    S.noisy_stream.reset();
    S.clean_stream.reset();
  });
}

void CacheWriter::write(int64_t s, std::vector<int64_t> ids, at::Tensor noisy, at::Tensor clean,
                        std::vector<std::string> texts) {
  DAEI_ASSERT(int64_t(ids.size()) == shard_end(s) - shard_begin(s), "shard {}: {} rows, the plan says {}", s,
              ids.size(), shard_end(s) - shard_begin(s));
  begin(s);
  append(std::move(ids), std::move(noisy), std::move(clean), std::move(texts));
  end();
}

void CacheWriter::finish() {
  State& S = *st_;
  DAEI_ASSERT(S.shard < 0, "shard {} was not ended", S.shard);
  S.queue->drain();
  if (S.plan.digest_later) {  // every rank hashed the source itself: the same bytes, or the build is refused
    const std::vector<std::string> all = S.comm.allgather(S.later_digest);
    DAEI_CHECK(std::all_of(all.begin(), all.end(), [&](const std::string& d) { return d == all[0]; }),
               "{}: the source changed while the cache was built (the ranks read different SHA-256s); build again",
               S.opt.dir);
    S.plan.corpus_sha = S.base.corpus_sha256 = all[0];
  }
  S.comm.barrier();
  if (S.comm.rank() == 0) {
    const int world = S.comm.size();
    if (!S.plan.noisy_done)
      write_file_atomic(S.opt.dir + "/manifest.json", make_manifest(S.opt.dir, S.base, S.plan.rows, S.opt, world).dump(1) + "\n");
    if (S.opt.clean && !S.plan.clean_done)
      write_file_atomic(S.clean_dir + "/manifest.json",
                        make_manifest(S.clean_dir, clean_meta(S.base), S.plan.rows, S.opt, world).dump(1) + "\n");
  }
  S.comm.barrier();
}

}  // namespace daei
