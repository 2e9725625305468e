// One split's rows, aligned: texts, clean and noisy embeddings, and the σ its noise was drawn at. What evaluation
// scores (src/eval reads a cache's through open_eval_split, src/eval/clean_cache.h, which the stages do not link)
// and what the stages' seeded synthetic set is made of (stages/loop/data_source.h: its clean rows are generated,
// not an embedder's, and it has no texts).
#pragma once
#include <string>
#include <vector>
#include <torch/types.h>

namespace daei {

struct EvalSplit {
  std::string name;
  std::vector<std::string> texts;
  at::Tensor clean, noisy;  // float32 [n, d]
  double sigma = 0;
};

}  // namespace daei
