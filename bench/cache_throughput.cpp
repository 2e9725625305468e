// Cache build throughput against the embedder alone, on the same rows, in one run (issue 4; target ≥ 95 %).
//   build/bench_cache_throughput CORPUS.jsonl [--rows N] [--shard-rows R] [--batch B] [--dtype float16]
//                                [--glove-dir DIR] [--sigma S] [--out results/cache_throughput.md]
// (a) embedder only: read the corpus rows, query the noisy embedder in batches with the cache's keys;
// (b) `cache build` of the same rows into a temporary folder (HDF5 shards, checksums, manifest).
// Each is run --reps times (5), alternating, and the best time of each is kept (the machine is shared).
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <sys/resource.h>
#include <unistd.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "build_info.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "data/cache.h"
#include "data/corpus.h"
#include "dist/communicator.h"
#include "model/release/embedder.h"

using namespace daei;
namespace fs = std::filesystem;

int main(int argc, char** argv) try {
  configure_allocator();  // as `daei cache build` runs (main() of the daei program): the shard buffers are reused
  logging::init(0, 1, false, "warn");
  std::string corpus, glove_dir, dtype = "float16", out = "results/cache_throughput.md";
  int64_t rows = 0, shard_rows = 20000, batch = 256, reps = 5;
  bool as_json = false;
  double sigma = 0.04;
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&] {
      DAEI_CHECK(i + 1 < argc, "{} needs a value", a);
      return std::string(argv[++i]);
    };
    if (a == "--rows") rows = std::stoll(val());
    else if (a == "--shard-rows") shard_rows = std::stoll(val());
    else if (a == "--batch") batch = std::stoll(val());
    else if (a == "--dtype") dtype = val();
    else if (a == "--glove-dir") glove_dir = val();
    else if (a == "--sigma") sigma = std::stod(val());
    else if (a == "--out") out = val();
    else if (a == "--reps") reps = std::stoll(val());
    else if (a == "--json") as_json = val() != "0";
    else corpus = a;
  }
  DAEI_CHECK(!corpus.empty(), "usage: bench_cache_throughput CORPUS.jsonl [--rows N] ...");
  if (glove_dir.empty()) {
    const char* a = std::getenv("DAEI_ASSETS");
    const char* h = std::getenv("HOME");
    glove_dir = a ? std::string(a) + "/glove-100d" : std::string(h ? h : ".") + "/.cache/daei/glove-100d";
  }
  auto emb = std::make_shared<NoisyEmbedder>(std::make_shared<GloveEmbedder>(glove_dir), sigma, 1);
  const auto tmp = fs::temp_directory_path() / ("daei-bench-cache-" + std::to_string(getpid()));
  fs::create_directories(tmp / "corpus");
  {  // the same rows for both: the first N of the corpus
    std::ifstream in(corpus);
    DAEI_CHECK(in, "cannot read {}", corpus);
    std::ofstream o(tmp / "corpus/train.jsonl");
    std::string line;
    int64_t n = 0;
    while ((rows == 0 || n < rows) && std::getline(in, line)) {
      o << line << "\n";
      ++n;
    }
    rows = n;
  }
  const std::string file = (tmp / "corpus/train.jsonl").string();
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  auto embed_only = [&] {
    auto t0 = now();
    std::vector<std::string> texts, keys;
    double checksum = 0;
    auto flush = [&] {
      if (texts.empty()) return;
      checksum += emb->embed(texts, keys).sum().item<double>();
      texts.clear();
      keys.clear();
    };
    for_each_corpus_row(file, [&](int64_t, int64_t id, std::string t) {
      texts.push_back(std::move(t));
      keys.push_back("train/" + std::to_string(id));
      if (int64_t(texts.size()) == batch) flush();
    });
    flush();
    (void)checksum;
    return secs(t0, now());
  };
  LocalCommunicator comm;
  auto cache_build = [&] {
    fs::remove_all(tmp / "cache");
    CacheBuildOptions o;
    o.split = "train";
    o.corpus_file = file;
    o.cache_dir = (tmp / "cache/train").string();
    o.shard_rows = shard_rows;
    o.batch_size = batch;
    o.dtype = dtype;
    auto t0 = now();
    build_cache(o, *emb, comm);
    return secs(t0, now());
  };
  const std::string load0 = read_file("/proc/loadavg").substr(0, 14);
  auto wall0 = now();
  double e = 1e30, c = 1e30;
  for (int64_t rep = 0; rep < reps; ++rep) {
    e = std::min(e, embed_only());
    c = std::min(c, cache_build());
  }
  auto v = verify_cache((tmp / "cache/train").string());
  const double wall = secs(wall0, now());
  fs::remove_all(tmp);

  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::string cpu;
  {
    std::ifstream ci("/proc/cpuinfo");
    std::string l;
    while (std::getline(ci, l))
      if (l.rfind("model name", 0) == 0) {
        cpu = l.substr(l.find(':') + 2);
        break;
      }
  }
  std::string rev = DAEI_GIT_REV;
  if (FILE* p = popen("git rev-parse --short=12 HEAD 2>/dev/null", "r")) {
    char b[64] = {0};
    if (fgets(b, sizeof b, p)) rev = std::string(b).substr(0, std::string(b).find('\n'));
    pclose(p);
  }
  std::string md = fmt::format(
      "# Cache build throughput vs. embedder only\n\n"
      "- command: `{}`\n- git revision: {}\n- machine: {} ({}, {} hardware threads; load average {} at the start: "
      "the machine is shared)\n- wall time: {:.1f} s\n\n"
      "Same {} rows, noisy GloVe-100d (sigma {}), 1 process, batch {}, shards of {} rows, {}; best of {} alternating runs each.\n\n"
      "| what | seconds | rows/s |\n|---|---:|---:|\n"
      "| embedder only (read corpus, embed + noise) | {:.3f} | {:.0f} |\n"
      "| cache build (same + HDF5 shards, fletcher32, digests, manifest) | {:.3f} | {:.0f} |\n"
      "| **cache build / embedder only** | | **{:.1f} %** |\n\n"
      "verify: {} rows, {} shards, digest {}\n",
      cmd, rev, host, cpu, std::thread::hardware_concurrency(), load0, wall, rows, sigma, batch, shard_rows, dtype, reps, e,
      rows / e, c, rows / c, 100.0 * e / c, v.rows, v.shards, v.digest);
  if (as_json) {  // one line for bench/runner.py
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::cout << nlohmann::json{{"rows", rows}, {"embed_s", e}, {"cache_s", c}, {"reps", reps},
                                {"maxrss_kb", ru.ru_maxrss}, {"verified_rows", v.rows}}
                     .dump()
              << std::endl;
  } else {
    std::cout << md;
  }
  if (!out.empty()) {
    fs::create_directories(fs::path(out).parent_path().empty() ? "." : fs::path(out).parent_path());
    write_file_atomic(out, md);
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "bench_cache_throughput: error: " << e.what() << "\n";
  return 1;
}
