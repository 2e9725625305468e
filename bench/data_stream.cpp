// Data time of one training epoch read from a noisy cache (issue 9 item 13, issue 16 item 1): the rows of every
// micro-batch of one rank in shard_plan order, noisy vectors and (with --texts) their texts, as stages 1-4 read them.
//   build/bench_data_stream CACHE_DIR [--rows N] [--batch B] [--world W] [--rank R] [--seed S] [--epoch E]
//                           [--texts] [--batches K] [--read-ahead] [--buffer-mb M]
// --rows N: the epoch covers rows [0, N) of the cache (default: all); --batches K: stop after K batches.
// --read-ahead: ask the reader to load batch t+1 (prefetch) before batch t is consumed.
// --legacy: the reader as it was before (d6603a4), copied here: every text one H5Dread under a lock, offsets of
// every shard loaded at open, HDF5's own chunk caches (16 MB per shard for vectors, 1 MB for texts).
// Prints one JSON line: seconds, batches, rows/s, peak RSS (VmHWM) and the reader's buffer statistics.
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/error.h"
#include "core/log.h"
#include "data/cache.h"
#include "dist/shard_plan.h"
#include <hdf5.h>
#include <mutex>

using namespace daei;

namespace {
// The pre-change reader (src/data/cache.cpp at d6603a4), trimmed to what an epoch needs.
struct Legacy {
  struct Sh {
    hid_t file, vec, text;
    int64_t begin, end;
    std::vector<int64_t> offsets;
  };
  std::vector<Sh> sh;
  int64_t dim = 0, rows = 0;
  bool half = true;
  std::mutex mu;
  explicit Legacy(const std::string& dir) {
    auto man = nlohmann::json::parse(std::ifstream(dir + "/manifest.json"));
    dim = man["dim"];
    rows = man["rows"];
    half = man["dtype"] == "float16";
    for (auto& s : man["shards"]) {
      Sh x;
      x.begin = s["row_begin"];
      x.end = s["row_end"];
      x.file = H5Fopen((dir + "/" + s["file"].get<std::string>()).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
      hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
      H5Pset_chunk_cache(dapl, 521, 16 << 20, 1.0);
      x.vec = H5Dopen2(x.file, "noisy", dapl);
      H5Pclose(dapl);
      x.text = H5Dopen2(x.file, "text", H5P_DEFAULT);
      hid_t offs = H5Dopen2(x.file, "text_offsets", H5P_DEFAULT);
      x.offsets.resize(x.end - x.begin + 1);
      H5Dread(offs, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, x.offsets.data());
      H5Dclose(offs);
      sh.push_back(std::move(x));
    }
  }
  size_t find(int64_t g) const {
    size_t s = 0;
    while (g >= sh[s].end) ++s;
    return s;
  }
  at::Tensor noisy(const std::vector<int64_t>& idx) {
    std::lock_guard<std::mutex> lk(mu);
    const int64_t n = idx.size();
    at::Tensor out = torch::empty({n, dim}, torch::kFloat32);
    std::vector<int64_t> order(n);
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return idx[a] < idx[b]; });
    for (int64_t i = 0; i < n;) {
      size_t s = find(idx[order[i]]);
      std::vector<int64_t> local, dest;
      int64_t j = i;
      for (; j < n && idx[order[j]] < sh[s].end; ++j) {
        local.push_back(idx[order[j]] - sh[s].begin);
        dest.push_back(order[j]);
      }
      // the old read_rows: a union of row runs in one H5Dread (no repeats in a shard_plan batch)
      hid_t fsp = H5Dget_space(sh[s].vec);
      H5Sselect_none(fsp);
      for (size_t a = 0; a < local.size();) {
        size_t b = a + 1;
        while (b < local.size() && local[b] == local[b - 1] + 1) ++b;
        hsize_t st[2] = {hsize_t(local[a]), 0}, ct[2] = {hsize_t(b - a), hsize_t(dim)};
        H5Sselect_hyperslab(fsp, H5S_SELECT_OR, st, nullptr, ct, nullptr);
        a = b;
      }
      hsize_t md[2] = {hsize_t(local.size()), hsize_t(dim)};
      hid_t msp = H5Screate_simple(2, md, nullptr);
      std::vector<float> buf(local.size() * dim);
      H5Dread(sh[s].vec, H5T_NATIVE_FLOAT, msp, fsp, H5P_DEFAULT, buf.data());
      H5Sclose(msp);
      H5Sclose(fsp);
      for (size_t k = 0; k < dest.size(); ++k)
        std::memcpy(out.data_ptr<float>() + dest[k] * dim, buf.data() + k * dim, dim * sizeof(float));
      i = j;
    }
    return out;
  }
  std::vector<std::string> texts(const std::vector<int64_t>& idx) {
    std::lock_guard<std::mutex> lk(mu);
    std::vector<std::string> out;
    for (int64_t g : idx) {
      const Sh& x = sh[find(g)];
      int64_t a = x.offsets[g - x.begin], b = x.offsets[g - x.begin + 1];
      std::string str(b - a, '\0');
      if (b > a) {
        hid_t fsp = H5Dget_space(x.text);
        hsize_t st = a, ct = b - a;
        H5Sselect_hyperslab(fsp, H5S_SELECT_SET, &st, nullptr, &ct, nullptr);
        hid_t msp = H5Screate_simple(1, &ct, nullptr);
        H5Dread(x.text, H5T_NATIVE_UINT8, msp, fsp, H5P_DEFAULT, str.data());
        H5Sclose(msp);
        H5Sclose(fsp);
      }
      out.push_back(std::move(str));
    }
    return out;
  }
};

int64_t vm_kb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string l;
  while (std::getline(in, l))
    if (l.rfind(key, 0) == 0) return std::stoll(l.substr(l.find(':') + 1));
  return -1;
}
}  // namespace

int main(int argc, char** argv) try {
  logging::init(0, 1, false, "warn");
  std::string dir;
  int64_t rows = 0, batch = 64, world = 1, rank = 0, seed = 0, epoch = 0, batches = 0, buffer_mb = 64;
  bool with_texts = false, read_ahead = false, legacy = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&] {
      DAEI_CHECK(i + 1 < argc, "{} needs a value", a);
      return std::stoll(argv[++i]);
    };
    if (a == "--rows") rows = val();
    else if (a == "--batch") batch = val();
    else if (a == "--world") world = val();
    else if (a == "--rank") rank = val();
    else if (a == "--seed") seed = val();
    else if (a == "--epoch") epoch = val();
    else if (a == "--batches") batches = val();
    else if (a == "--buffer-mb") buffer_mb = val();
    else if (a == "--texts") with_texts = true;
    else if (a == "--read-ahead") read_ahead = true;
    else if (a == "--legacy") legacy = true;
    else dir = a;
  }
  DAEI_CHECK(!dir.empty(), "usage: bench_data_stream CACHE_DIR [--rows N] [--batch B] ...");
  auto t_open = std::chrono::steady_clock::now();
  CacheReadOptions ro;
  ro.buffer_bytes = buffer_mb << 20;
  ro.read_ahead = read_ahead;
  std::unique_ptr<NoisyCache> cache;
  std::unique_ptr<Legacy> old;
  if (legacy) old = std::make_unique<Legacy>(dir);
  else cache = NoisyCache::open(dir, {}, ro);
  const int64_t n_all = legacy ? old->rows : cache->size();

  const double open_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_open).count();
  if (rows <= 0 || rows > n_all) rows = n_all;
  const EpochOrder order(rows, uint64_t(seed), epoch);  // as the Trainer: one step's rows at a time
  int64_t nb = steps_per_epoch(rows, int(world), batch, /*drop_last=*/false);
  if (batches > 0) nb = std::min(nb, batches);
  auto rows_of = [&](int64_t b) {
    std::vector<int64_t> r;
    for (int64_t i : step_rows(order, int(world), int(rank), b, batch))
      if (i >= 0) r.push_back(i);
    return r;
  };
  const int64_t rss0 = vm_kb("VmRSS:");
  double checksum = 0;
  int64_t text_bytes = 0, n_rows = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t b = 0; b < nb; ++b) {
    auto r = rows_of(b);
    if (read_ahead && b + 1 < nb) cache->prefetch(rows_of(b + 1), with_texts);
    at::Tensor y = legacy ? old->noisy(r) : cache->noisy(r);
    checksum += y.sum().item<double>();
    if (with_texts)
      for (auto& t : legacy ? old->texts(r) : cache->texts(r)) text_bytes += int64_t(t.size());
    n_rows += int64_t(r.size());
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json j{{"cache", dir},       {"rows", rows},         {"world", world},
                   {"rank", rank},       {"batch", batch},       {"batches", nb},
                   {"texts", with_texts}, {"read_ahead", read_ahead}, {"open_s", open_s},
                   {"seconds", s},       {"rows_per_s", n_rows / s}, {"ms_per_batch", 1e3 * s / nb},
                   {"rss_start_mb", rss0 / 1024.0}, {"peak_rss_mb", vm_kb("VmHWM:") / 1024.0},
                   {"checksum", checksum}, {"text_bytes", text_bytes}};
  j["legacy"] = legacy;
  if (!legacy) {
  auto st = cache->read_stats();
  j["buffer_mb"] = buffer_mb;
  j["chunk_hits"] = st.chunk_hits;
  j["chunk_misses"] = st.chunk_misses;
  j["h5dread_calls"] = st.chunk_reads;
  j["mb_read"] = st.bytes_read / 1048576.0;
  j["peak_buffer_mb"] = st.peak_buffer_bytes / 1048576.0;
  j["peak_held_mb"] = st.peak_pinned_bytes / 1048576.0;
  }
  std::cout << j.dump() << std::endl;
  return 0;
} catch (const std::exception& e) {
  std::cerr << "bench_data_stream: error: " << e.what() << "\n";
  return 1;
}
