// Pretraining on the attacker's own texts (issue 22 item 2). The paper's inverter starts from a pretrained t5-base,
// which cannot be downloaded here; a T5 of the inverters' shape is instead pretrained with T5's span-corruption
// objective (Raffel et al. 2020, §3.1.4; the public `random_spans_noise_mask`) on the TRAINING TEXTS ONLY:
//   noise mask   round(n · noise_density) of a text's n pieces, in round(noise / mean_span_length) spans, noise and
//                kept pieces each cut into that many non-empty runs at random, interleaved kept-run first
//   encoder      the kept pieces, each noise span replaced by its own sentinel, then eos
//   decoder      each span's sentinel followed by the span, then eos
// Sentinel k is id V + k, V the tokenizer's vocabulary: the pretraining T5 has `pretrain.sentinels` extra rows,
// which no inverter or corrector has; load_pretrained_t5 (model/net/t5_pretrained.h) drops them. No embedding of any text is read, so the
// threat model allows it. Every inverter and fresh corrector of a run then starts from runs/NAME/pretrain/final/t5
// (warm-started correctors through the inverter they copy), equally for all systems.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stages/recipes/lm.h"

namespace daei {

class Config;
class SplitMix;

// The pretrain.* keys the stage reads itself, read once by from_config (the values: configs/defaults/pretrain.yaml);
// steps, batch_size, grad_accum, schedule, warmup_steps, clip_norm and eval_every are the Trainer's (trainer_options).
struct PretrainOptions {
  bool enabled = false;
  double lr = 0, weight_decay = 0;
  int64_t max_length = 0, sentinels = 0;
  double noise_density = 0, mean_span_length = 0;

  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("enabled", s.enabled), v("lr", s.lr), v("weight_decay", s.weight_decay), v("max_length", s.max_length);
    v("sentinels", s.sentinels), v("noise_density", s.noise_density), v("mean_span_length", s.mean_span_length);
  }
  static PretrainOptions from_config(const Config& cfg);
};

// T5's noise mask over n pieces (true = noise). n < 2: every piece is noise (nothing else can be asked).
std::vector<bool> span_noise_mask(int64_t n, double noise_density, double mean_span_length, SplitMix& rng);
// The number of spans span_noise_mask makes of n pieces (at most this many sentinels are needed).
int64_t span_count(int64_t n, double noise_density, double mean_span_length);

// Encoder input and decoder target of `ids` (a trailing eos excluded from the masking) under `noise`, sentinel k
// = first_sentinel + k.
TextExample apply_span_corruption(const std::vector<int64_t>& ids, const std::vector<bool>& noise,
                                  int64_t first_sentinel, int64_t eos_id);

// The stage's objective: masks keyed by (run.seed, step, row).
TextObjective pretrain_objective(const Config& cfg, int64_t tokenizer_vocab, int64_t eos_id);

// The pretrained T5 an inverter or corrector of this run starts from ("" when pretrain.enabled is false).
std::string pretrained_t5_dir(const Config& cfg, const std::string& run_dir);

}  // namespace daei
