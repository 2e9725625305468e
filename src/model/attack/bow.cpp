// The bag-of-words inverter (what and why: bow.h).
#include "model/attack/bow.h"

#include <torch/torch.h>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fields.h"
#include "core/fsutil.h"
#include "core/safetensors.h"

namespace daei {

BowInverterImpl::BowInverterImpl(BowOptions opt, std::vector<std::string> words)
    : opt_(opt), words_(std::move(words)) {
  DAEI_CHECK(opt_.dim > 0 && opt_.hidden > 0 && opt_.depth >= 0 && opt_.k > 0 && !words_.empty() &&
                 opt_.min_prob >= 0 && opt_.min_prob < 1,
             "bow: dim {} hidden {} depth {} k {} min_prob {} and {} words (dim, hidden, k and the words positive, "
             "depth >= 0, min_prob in [0, 1))", opt_.dim, opt_.hidden, opt_.depth, opt_.k, opt_.min_prob,
             words_.size());
  layers = register_module("layers", torch::nn::Sequential());
  int64_t in = opt_.dim;
  for (int64_t i = 0; i < opt_.depth; ++i) {
    layers->push_back(torch::nn::Linear(in, opt_.hidden));
    layers->push_back(torch::nn::GELU());
    in = opt_.hidden;
  }
  layers->push_back(torch::nn::Linear(in, static_cast<int64_t>(words_.size())));
  input_mean = register_buffer("input_mean", torch::zeros({opt_.dim}));
  input_scale = register_buffer("input_scale", torch::ones({opt_.dim}));
}

at::Tensor BowInverterImpl::forward(const at::Tensor& e) {
  DAEI_CHECK(e.dim() == 2 && e.size(1) == opt_.dim, "bow: input of shape {} for a model of {}-d embeddings",
             fmt::format("{}", fmt::join(e.sizes(), "x")), opt_.dim);
  return layers->forward((e.to(input_mean.device(), input_mean.scalar_type()) - input_mean) * input_scale);
}

void BowInverterImpl::fit_standardisation(const at::Tensor& inputs) {
  torch::NoGradGuard ng;
  auto x = inputs.to(torch::kFloat64);
  input_mean.copy_(x.mean(0));
  // One scale for every coordinate (the inputs' overall spread): keeps the geometry of the embedding.
  input_scale.fill_(1.0 / std::max(1e-12, (x - x.mean(0)).pow(2).sum(1).mean().sqrt().item<double>()));
}

std::string RankedWords::answer(int64_t k, double min_prob) const {
  std::string s;
  for (size_t i = 0; i < words.size() && static_cast<int64_t>(i) < k; ++i) {
    if (i > 0 && probs[i] < min_prob) break;
    s += (i ? " " : "") + words[i];
  }
  return s;
}

std::vector<RankedWords> BowInverterImpl::ranked(const at::Tensor& e, int64_t k) {
  torch::NoGradGuard ng;
  const bool was_training = is_training();
  eval();
  const auto top = torch::softmax(forward(e).to(torch::kFloat64), 1)
                       .topk(std::min<int64_t>(k, static_cast<int64_t>(words_.size())), 1);
  train(was_training);
  const auto p = std::get<0>(top).cpu().contiguous(), idx = std::get<1>(top).to(torch::kInt64).cpu().contiguous();
  std::vector<RankedWords> out(static_cast<size_t>(idx.size(0)));
  const int64_t n = idx.size(1);
  for (int64_t i = 0; i < idx.size(0); ++i)
    for (int64_t j = 0; j < n; ++j) {
      out[i].words.push_back(words_[idx.data_ptr<int64_t>()[i * n + j]]);
      out[i].probs.push_back(p.data_ptr<double>()[i * n + j]);
    }
  return out;
}

std::vector<std::string> BowInverterImpl::recover(const at::Tensor& e) {
  std::vector<std::string> out;
  for (const auto& r : ranked(e, opt_.k)) out.push_back(r.answer(opt_.k, opt_.min_prob));
  return out;
}

void BowInverterImpl::save(const std::string& dir) const {
  nlohmann::json j;
  write_json_fields(opt_, j);
  j["words"] = words_;
  save_module_folder(dir, *this, "bow.json", j.dump(1) + "\n");
}

BowInverter load_bow_inverter(const std::string& dir) {
  const std::string cfg = dir + "/bow.json";
  DAEI_CHECK(file_exists(cfg), "{}: not a bag-of-words inverter folder (no bow.json)", dir);
  BowOptions o;
  const auto j = read_json_text_fields(o, read_file(cfg), cfg);
  DAEI_CHECK(j.contains("words") && j["words"].is_array(), "{}: no 'words'", cfg);
  BowInverter m(o, j["words"].get<std::vector<std::string>>());
  const std::string weights = module_folder_weights(dir);
  load_module_state(*m, load_safetensors(weights), weights);
  m->eval();
  return m;
}

}  // namespace daei
