// daei's sentence embedder (a sentence-transformers folder through daei's BERT) timed on a file of texts: the daei
// side of the `embed_minilm` entry (bench/embed_minilm.sh, against sentence-transformers' own encode).
//   build/bench_embed_bench --model DIR --texts FILE [--batch 64] [--max-length 256] [--rounds 3] [--threads 1]
// FILE: one text a line. Prints one JSON line: {"texts", "times" (s a round), "dim", "first" (row 0's first values)}.
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/config.h"
#include "model/release/embedder.h"

using namespace daei;

int main(int argc, char** argv) try {
  std::string model, texts_file;
  int64_t batch = 64, max_length = 256, rounds = 3, threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--model") model = v;
    else if (a == "--texts") texts_file = v;
    else if (a == "--batch") batch = std::stoll(v);
    else if (a == "--max-length") max_length = std::stoll(v);
    else if (a == "--rounds") rounds = std::stoll(v);
    else if (a == "--threads") threads = std::stoll(v);
    else throw std::invalid_argument("unknown flag " + a);
  }
  if (model.empty() || texts_file.empty()) throw std::invalid_argument("--model DIR and --texts FILE are required");
  torch::set_num_threads(static_cast<int>(threads));
  std::vector<std::string> texts;
  std::ifstream in(texts_file);
  for (std::string line; std::getline(in, line);) texts.push_back(line);
  if (texts.empty()) throw std::invalid_argument(texts_file + ": no texts");
  Config cfg = Config::defaults();
  cfg.set("embedder.kind=bert", "bench");
  cfg.set("embedder.model=" + model, "bench");
  cfg.set("embedder.batch_size=" + std::to_string(batch), "bench");
  cfg.set("embedder.max_length=" + std::to_string(max_length), "bench");
  const auto emb = make_clean_embedder(cfg);
  std::vector<double> times;
  at::Tensor e;
  for (int64_t r = 0; r < rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    e = emb->embed(texts);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<float> first(e[0].data_ptr<float>(), e[0].data_ptr<float>() + 4);
  std::cout << nlohmann::json{{"texts", texts.size()}, {"times", times}, {"dim", e.size(1)}, {"first", first},
                              {"threads", torch::get_num_threads()}, {"embedder", emb->id()}}
                   .dump()
            << std::endl;
  return 0;
} catch (const std::exception& ex) {
  std::cerr << "bench_embed_bench: error: " << ex.what() << "\n";
  return 1;
}
