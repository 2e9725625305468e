// Data time of one training epoch read from a noisy cache (issue 9 item 13, issue 16 item 1): the rows of every
// micro-batch of one rank in shard_plan order, noisy vectors and (with --texts) their texts, as stages 1-4 read them.
//   build/bench_data_stream CACHE_DIR [--rows N] [--batch B] [--world W] [--rank R] [--seed S] [--epoch E]
//                           [--texts] [--batches K] [--read-ahead] [--buffer-mb M]
// --rows N: the epoch covers rows [0, N) of the cache (default: all); --batches K: stop after K batches.
// --read-ahead: ask the reader to load batch t+1 (prefetch) before batch t is consumed.
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

using namespace daei;

namespace {
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
  bool with_texts = false, read_ahead = false;
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
    else dir = a;
  }
  DAEI_CHECK(!dir.empty(), "usage: bench_data_stream CACHE_DIR [--rows N] [--batch B] ...");
  auto t_open = std::chrono::steady_clock::now();
#ifdef DAEI_CACHE_READ_AHEAD
  CacheReadOptions ro;
  ro.buffer_bytes = buffer_mb << 20;
  ro.read_ahead = read_ahead;
  auto cache = NoisyCache::open(dir, {}, ro);
#else
  DAEI_CHECK(!read_ahead, "this reader has no read-ahead");
  (void)buffer_mb;
  auto cache = NoisyCache::open(dir);
#endif
  const double open_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_open).count();
  if (rows <= 0 || rows > cache->size()) rows = cache->size();
  const auto plan = shard_plan(rows, int(world), int(rank), epoch, uint64_t(seed), batch);
  int64_t nb = int64_t(plan.size()) / batch;
  if (batches > 0) nb = std::min(nb, batches);
  auto rows_of = [&](int64_t b) {
    std::vector<int64_t> r;
    for (int64_t k = b * batch; k < (b + 1) * batch; ++k)
      if (plan[k] >= 0) r.push_back(plan[k]);
    return r;
  };
  const int64_t rss0 = vm_kb("VmRSS:");
  double checksum = 0;
  int64_t text_bytes = 0, n_rows = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t b = 0; b < nb; ++b) {
    auto r = rows_of(b);
#ifdef DAEI_CACHE_READ_AHEAD
    if (read_ahead && b + 1 < nb) cache->prefetch(rows_of(b + 1), with_texts);
#endif
    at::Tensor y = cache->noisy(r);
    checksum += y.sum().item<double>();
    if (with_texts)
      for (auto& t : cache->texts(r)) text_bytes += int64_t(t.size());
    n_rows += int64_t(r.size());
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json j{{"cache", dir},       {"rows", rows},         {"world", world},
                   {"rank", rank},       {"batch", batch},       {"batches", nb},
                   {"texts", with_texts}, {"read_ahead", read_ahead}, {"open_s", open_s},
                   {"seconds", s},       {"rows_per_s", n_rows / s}, {"ms_per_batch", 1e3 * s / nb},
                   {"rss_start_mb", rss0 / 1024.0}, {"peak_rss_mb", vm_kb("VmHWM:") / 1024.0},
                   {"checksum", checksum}, {"text_bytes", text_bytes}};
#ifdef DAEI_CACHE_READ_AHEAD
  auto st = cache->read_stats();
  j["buffer_mb"] = buffer_mb;
  j["chunk_hits"] = st.chunk_hits;
  j["chunk_misses"] = st.chunk_misses;
  j["h5dread_calls"] = st.chunk_reads;
  j["mb_read"] = st.bytes_read / 1048576.0;
  j["peak_buffer_mb"] = st.peak_buffer_bytes / 1048576.0;
  j["peak_held_mb"] = st.peak_pinned_bytes / 1048576.0;
#endif
  std::cout << j.dump() << std::endl;
  return 0;
} catch (const std::exception& e) {
  std::cerr << "bench_data_stream: error: " << e.what() << "\n";
  return 1;
}
