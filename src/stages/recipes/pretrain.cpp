// The pretrain stage: T5 span corruption on the training texts (what and why: pretrain.h).
#include "stages/recipes/pretrain.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/rng.h"
#include "data/run_layout.h"

namespace daei {
namespace {

// Counts of noise pieces and spans for n pieces (n ≥ 2), as T5's random_spans_noise_mask computes them, with the
// span count also kept below the kept pieces' count so that every run is non-empty.
void noise_counts(int64_t n, double density, double mean_span, int64_t& noise, int64_t& spans) {
  noise = std::clamp<int64_t>(std::llround(double(n) * density), 1, n - 1);
  spans = std::clamp<int64_t>(std::llround(double(noise) / mean_span), 1, std::min(noise, n - noise));
}

// `items` cut into `segments` non-empty runs at random: segments − 1 distinct cut points among the items − 1 gaps.
std::vector<int64_t> random_segmentation(int64_t items, int64_t segments, SplitMix& rng) {
  std::vector<int64_t> gaps(items - 1);
  for (int64_t i = 0; i < items - 1; ++i) gaps[i] = i + 1;
  for (int64_t i = 0; i < segments - 1; ++i)  // partial Fisher–Yates: the first segments − 1 are a uniform choice
    std::swap(gaps[i], gaps[i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(items - 1 - i)))]);
  std::vector<int64_t> cuts(gaps.begin(), gaps.begin() + (segments - 1));
  std::sort(cuts.begin(), cuts.end());
  std::vector<int64_t> lengths;
  int64_t prev = 0;
  for (int64_t c : cuts) lengths.push_back(c - prev), prev = c;
  lengths.push_back(items - prev);
  return lengths;
}

uint64_t pretrain_example_key(uint64_t seed, int64_t step, int64_t row) {
  return splitmix64(splitmix64(splitmix64(seed ^ 0x5350414E43ULL) + static_cast<uint64_t>(step)) +
                    static_cast<uint64_t>(row));
}

}  // namespace

int64_t span_count(int64_t n, double noise_density, double mean_span_length) {
  if (n < 2) return n;
  int64_t noise = 0, spans = 0;
  noise_counts(n, noise_density, mean_span_length, noise, spans);
  return spans;
}

std::vector<bool> span_noise_mask(int64_t n, double noise_density, double mean_span_length, SplitMix& rng) {
  if (n < 2) return std::vector<bool>(static_cast<size_t>(std::max<int64_t>(n, 0)), true);
  int64_t noise = 0, spans = 0;
  noise_counts(n, noise_density, mean_span_length, noise, spans);
  const auto noise_runs = random_segmentation(noise, spans, rng);
  const auto kept_runs = random_segmentation(n - noise, spans, rng);
  std::vector<bool> mask;
  mask.reserve(n);
  for (int64_t s = 0; s < spans; ++s) {
    mask.insert(mask.end(), kept_runs[s], false);
    mask.insert(mask.end(), noise_runs[s], true);
  }
  return mask;
}

TextExample apply_span_corruption(const std::vector<int64_t>& ids, const std::vector<bool>& noise,
                                  int64_t first_sentinel, int64_t eos_id) {
  const size_t n = !ids.empty() && ids.back() == eos_id ? ids.size() - 1 : ids.size();
  DAEI_CHECK(noise.size() == n, "span corruption: a mask of {} for {} pieces", noise.size(), n);
  TextExample ex;
  int64_t sentinel = first_sentinel, kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!noise[i]) {
      ex.input.push_back(ids[i]);
      ++kept;
    } else if (i == 0 || !noise[i - 1]) {  // a span starts: one sentinel stands for it in the input
      ex.input.push_back(sentinel);
      ex.target.push_back(sentinel++);
    }
    if (noise[i]) ex.target.push_back(ids[i]);
  }
  ex.input.push_back(eos_id);
  ex.target.push_back(eos_id);
  ex.kept = n > 0 ? double(kept) / double(n) : 1.0;
  return ex;
}

PretrainOptions PretrainOptions::from_config(const Config& cfg) {
  PretrainOptions o;
  fields(o, config_reader(cfg, "pretrain"));
  return o;
}

TextObjective pretrain_objective(const Config& cfg, int64_t tokenizer_vocab, int64_t eos_id) {
  const auto options = PretrainOptions::from_config(cfg);
  TextObjective o;
  o.section = "pretrain";
  o.final_name = "t5";
  o.max_length = options.max_length;
  o.extra_vocab = options.sentinels;
  o.lr = options.lr;
  o.weight_decay = options.weight_decay;
  const double density = options.noise_density, mean_span = options.mean_span_length;
  int64_t most = 0;  // the pieces of a text are at most max_length − 1 (eos excluded)
  for (int64_t n = 0; n < o.max_length; ++n) most = std::max(most, span_count(n, density, mean_span));
  DAEI_CHECK(most <= o.extra_vocab,
             "pretrain.sentinels {} is too few: a text of up to {} pieces (pretrain.max_length) can have {} spans at "
             "noise_density {} and mean_span_length {}",
             o.extra_vocab, o.max_length - 1, most, density, mean_span);
  const uint64_t seed = static_cast<uint64_t>(cfg.integer("run.seed"));
  o.make = [=](const std::vector<int64_t>& ids, int64_t step, int64_t row) {
    SplitMix rng(pretrain_example_key(seed, step, row));
    const int64_t n = !ids.empty() && ids.back() == eos_id ? int64_t(ids.size()) - 1 : int64_t(ids.size());
    return apply_span_corruption(ids, span_noise_mask(n, density, mean_span, rng), tokenizer_vocab, eos_id);
  };
  o.about_json = nlohmann::json{{"stage", "pretrain"},
                                {"objective", "T5 span corruption: noise spans replaced by sentinels in the input; "
                                              "target each span's sentinel and the span"},
                                {"data", "training texts only (no embeddings)"},
                                {"tokenizer_vocab", tokenizer_vocab},
                                {"sentinels", o.extra_vocab},
                                {"first_sentinel", tokenizer_vocab},
                                {"noise_density", density},
                                {"mean_span_length", mean_span},
                                {"max_length", o.max_length}}
                     .dump(2);
  o.summary = fmt::format("T5 span corruption (noise density {}, mean span {}, {} sentinels)", density, mean_span,
                          o.extra_vocab);
  return o;
}

std::string pretrained_t5_dir(const Config& cfg, const std::string& run_dir) {
  return PretrainOptions::from_config(cfg).enabled ? RunLayout(run_dir).final_module("pretrain", "t5") : "";
}

}  // namespace daei
