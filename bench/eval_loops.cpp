// Where eval spends its time once correctors are real (issue 24 item 3): the correction loop and the adversarial
// decoding of zsinvert, at the replicate-cpu model sizes with seeded random weights (T5 d_model 128, 2+2 layers,
// d 100), a SentencePiece model trained here on seeded sentences, and a bag-of-hashed-words black box with noise
// σ 0.04 (GloVe's cost profile: a mean of word vectors). Random weights decode to full-length texts: the loop's
// worst case per round. Prints one JSON line.
//   build/bench_eval_loops correct  [--texts N] [--beam S] [--rounds R] [--embed-chunk C] [--reps K]
//   build/bench_eval_loops zsinvert [--texts N] [--beam S] [--top-k K] [--steps T] [--embed-chunk C] [--reps K]
// "times": wall seconds of each repetition; "queries": black-box queries of one repetition; "query_s": the time
// inside the black box (its calls, counted by the bench), so the loop's own cost is times − query_s.
// --mpi 1 (correct, under mpirun -np N): the texts split over the ranks as `daei eval` splits them (issue 35);
// "times" are rank 0's after a barrier, so the slowest rank's, and only rank 0 prints.
#include <torch/torch.h>

#include <filesystem>
#include <unistd.h>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "core/allocator.h"
#include "core/rng.h"
#include "dist/communicator.h"
#include "dist/mpi_process.h"
#include "eval/correction.h"
#include "eval/zsinvert.h"
#include "model/attack/corrector.h"
#include "model/net/t5.h"
#include "model/text/tokenizer_spm.h"

using namespace daei;
using namespace daei::bench;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {
constexpr int64_t kDim = 100;

const std::vector<std::string>& words() {
  static const std::vector<std::string> w = [] {  // 9,000 seeded letter strings of 3-9 letters
    std::vector<std::string> out;
    SplitMix r(9);
    for (int i = 0; i < 9000; ++i) {
      std::string s;
      for (uint64_t k = 0, n = 3 + r.next() % 7; k < n; ++k) s += static_cast<char>('a' + r.next() % 26);
      out.push_back(s);
    }
    return out;
  }();
  return w;
}

std::string sentence(SplitMix& r) {
  const int64_t n = 4 + static_cast<int64_t>(r.next() % 12);
  std::string s;
  for (int64_t k = 0; k < n; ++k) s += (k ? " " : "") + words()[r.next() % words().size()];
  return s;
}

std::shared_ptr<SpmTokenizer> tokenizer(const fs::path& dir) {
  SplitMix r(5);
  {
    std::ofstream out(dir / "corpus.txt");
    for (int i = 0; i < 30000; ++i) out << sentence(r) << "\n";
  }
  SpmTokenizer::train((dir / "corpus.txt").string(), arg("vocab", 8000), (dir / "spm").string());
  return std::make_shared<SpmTokenizer>((dir / "spm.model").string());
}

T5Config t5_config(int64_t vocab) {
  T5Config c;
  c.vocab_size = vocab, c.d_model = 128, c.d_kv = 32, c.d_ff = 512, c.num_layers = 2, c.num_decoder_layers = 2;
  c.num_heads = 4, c.dropout_rate = 0.0;
  return c;
}

// The black box: mean of seeded per-word vectors, normalised, plus N(0, σ²) keyed by the query key.
struct HashedBox {
  double sigma = 0.04;
  double seconds = 0;
  int64_t queries = 0;
  at::Tensor operator()(const std::vector<std::string>& texts, const std::vector<std::string>& keys) {
    const double t0 = now();
    auto out = torch::zeros({static_cast<int64_t>(texts.size()), kDim});
    auto a = out.accessor<float, 2>();
    for (size_t i = 0; i < texts.size(); ++i) {
      size_t start = 0;
      int64_t n = 0;
      while (start <= texts[i].size()) {
        size_t end = texts[i].find(' ', start);
        if (end == std::string::npos) end = texts[i].size();
        if (end > start) {
          SplitMix w(std::hash<std::string>{}(texts[i].substr(start, end - start)));
          for (int64_t d = 0; d < kDim; ++d) a[i][d] += static_cast<float>(w.uniform() - 0.5);
          ++n;
        }
        start = end + 1;
      }
      SplitMix noise(std::hash<std::string>{}(keys[i]));
      double norm = 0;
      for (int64_t d = 0; d < kDim; ++d) norm += double(a[i][d]) * a[i][d];
      norm = std::sqrt(std::max(norm, 1e-12));
      for (int64_t d = 0; d < kDim; ++d)
        a[i][d] = static_cast<float>(a[i][d] / norm + sigma * std::sqrt(-2 * std::log(std::max(noise.uniform(), 1e-300))) *
                                                          std::cos(6.283185307179586 * noise.uniform()));
    }
    queries += static_cast<int64_t>(texts.size());
    seconds += now() - t0;
    return out;
  }
};

json cmd_correct(const SpmTokenizer& tok, Communicator* comm) {
  const int64_t n = arg("texts", 32), reps = arg("reps", 2);
  torch::manual_seed(3);
  CorrectorConfig cc;
  cc.dim = kDim, cc.repeat = 16, cc.t5 = t5_config(tok.vocab_size());
  Corrector corr(cc);
  corr->eval();
  CorrectionOptions o;
  o.decoding.num_beams = arg("beam", 3), o.max_steps = arg("rounds", 10), o.early_stop = false;
  o.embed_chunk = arg("embed-chunk", 256), o.gen_batch = arg("gen-batch", 64);
  SplitMix r(11);
  std::vector<std::string> initial, ids;
  for (int64_t i = 0; i < n; ++i) initial.push_back(sentence(r)), ids.push_back("bench/" + std::to_string(i));
  auto y = torch::randn({n, kDim}) / std::sqrt(double(kDim));
  std::vector<double> times, query_s;
  int64_t queries = 0;
  for (int64_t k = 0; k < reps + 1; ++k) {  // the first is a warm-up
    HashedBox box;
    if (comm) comm->barrier();
    const double t0 = now();
    auto res = run_correction(y, initial, ids, std::ref(box), [](const at::Tensor& e) { return e; }, *corr, tok, o,
                              comm);
    if (comm) comm->barrier();
    if (k == 0) continue;
    times.push_back(now() - t0), query_s.push_back(box.seconds);
    queries = res.total_queries();
  }
  return json{{"texts", n},          {"beam", o.decoding.num_beams},   {"rounds", o.max_steps}, {"embed_chunk", o.embed_chunk},
              {"times", times},      {"query_s", query_s}, {"queries", queries}, {"vocab", tok.vocab_size()},
              {"ranks", comm ? comm->size() : 1}};
}

json cmd_zsinvert(const std::shared_ptr<SpmTokenizer>& tok) {
  const int64_t n = arg("texts", 8), reps = arg("reps", 2);
  torch::manual_seed(4);
  auto t5 = std::make_shared<T5ModelImpl>(t5_config(tok->vocab_size()));
  t5->eval();
  const auto lm = t5_generator(t5, tok, 32);
  ZsInvertOptions o;
  o.beam = arg("beam", 5), o.top_k = arg("top-k", 50), o.max_steps = arg("steps", 20);
  o.embed_chunk = arg("embed-chunk", 1024), o.progress_every_s = 1e9;
  std::vector<std::string> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back("bench/" + std::to_string(i));
  auto y = torch::randn({n, kDim}) / std::sqrt(double(kDim));
  std::vector<double> times, query_s;
  int64_t queries = 0;
  for (int64_t k = 0; k < reps + 1; ++k) {
    HashedBox box;
    const double t0 = now();
    auto res = run_zsinvert(y, ids, std::ref(box), [](const at::Tensor& e) { return e; }, lm, o);
    if (k == 0) continue;
    times.push_back(now() - t0), query_s.push_back(box.seconds);
    queries = 0;
    for (auto q : res.queries_per_text) queries += q;
  }
  return json{{"texts", n}, {"beam", o.beam}, {"top_k", o.top_k}, {"steps", o.max_steps}, {"embed_chunk", o.embed_chunk},
              {"times", times}, {"query_s", query_s}, {"queries", queries}, {"vocab", tok->vocab_size()}};
}
}  // namespace

int main(int argc, char** argv) try {
  const std::string malloc_mode = configure_allocator();
  if (argc < 2 || (std::string(argv[1]) != "correct" && std::string(argv[1]) != "zsinvert")) {
    std::cerr << "usage: bench_eval_loops correct|zsinvert [--key value ...]\n";
    return 2;
  }
  const std::string cmd = argv[1];
  if (argc % 2 != 0) throw std::runtime_error("arguments come as --key value pairs");
  for (int i = 2; i + 1 < argc; i += 2) g_args[std::string(argv[i]).substr(2)] = argv[i + 1];
  for (const char* k : {"texts", "reps", "threads", "vocab"})
    if (arg(k, 1) < 1) throw std::runtime_error(std::string("--") + k + " must be at least 1");
  torch::set_num_threads(static_cast<int>(arg("threads", 1)));
  struct TempDir {  // removed on every exit, errors included
    fs::path p = fs::temp_directory_path() / ("daei-bench-eval-" + std::to_string(::getpid()));
    TempDir() { fs::create_directories(p); }
    ~TempDir() { fs::remove_all(p); }
  } dir;
  std::unique_ptr<Communicator> comm;
  if (arg("mpi", 0)) {
    if (cmd != "correct") throw std::runtime_error("--mpi 1 is for correct");
    MpiProcess::init(&argc, &argv);
    comm = make_mpi_communicator();
  }
  auto tok = tokenizer(dir.p);  // the same seeded corpus and trainer on every rank
  Usage u;
  json j = cmd == "correct" ? cmd_correct(*tok, comm.get()) : cmd_zsinvert(tok);
  u.fill(j);
  j["cmd"] = cmd, j["impl"] = "daei C++", j["malloc"] = malloc_mode, j["threads"] = torch::get_num_threads();
  if (!comm || comm->is_root()) std::cout << j.dump() << std::endl;
  comm.reset();
  if (MpiProcess::initialized()) MpiProcess::finalize();
  return 0;
} catch (const std::invalid_argument& e) {
  std::cerr << "bench_eval_loops: " << e.what() << "\n";
  return 2;
} catch (const std::exception& e) {
  std::cerr << "bench_eval_loops: " << e.what() << "\n";
  return 1;
}
