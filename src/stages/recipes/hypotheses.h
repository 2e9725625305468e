// Stage-4 data (paper §IV-A; reference notes §1.2, §2.4): the stage-3 inverter decodes (greedy, batched) every
// training text from its denoised noisy embedding, x̂ = inverter(DAE(y, σ)), and each hypothesis is queried once
// through the noisy embedder. Written as a noisy cache, cache/hyp-train/, row for row aligned with cache/train:
//   ids[N]   the training rows' corpus ids      noisy[N, d]  f̃(x̂), the hypothesis' noisy embedding
//   text     the hypothesis x̂ (not the true text; that stays in cache/train)
// so the stage-4 trainer reads y and the true text from cache/train and (x̂, f̃(x̂)) from cache/hyp-train by row,
// both through NoisyCache.
//
// Every query has its own noise key, hypothesis_query_key(round, id, x̂) = "hyp/r<round>/<id>/<x̂>": a hypothesis
// never reuses its target's noise ("train/<id>"), two rows with the same hypothesis get different noise, and so do
// two rounds — as a real release interface, which draws fresh noise for every query, behaves.
//
// Written by the one cache writer (data/cache_writer.h), as any cache: shards of shard_rows rows round-robin over the
// ranks (collective), each written under a temporary name and renamed; complete, intact shards are kept when the
// build is run again (resume); rank 0 writes manifest.json last, with a "hypotheses" block saying how they were made. Shards and manifest record a source digest (SHA-256 of the training cache's
// manifest, the inverter's and the DAE's weights, σ, round and max_length) in the corpus_sha256 field: a build
// from other models is refused with an explanation instead of being mixed in.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <torch/types.h>

#include "model/net/generate.h"

namespace daei {

class Communicator;
class Config;
class DaeImpl;
class InverterImpl;
class NoisyEmbedder;
class SpmTokenizer;

struct HypothesisCacheOptions {
  std::string train_cache_dir;  // runs/NAME/cache/train (y: the targets)
  std::string cache_dir;        // runs/NAME/cache/hyp-train
  std::string split = "hyp-train";
  double dae_sigma = 0;         // σ the frozen DAE is called at (the release's σ₀)
  int64_t round = 0;            // part of every noise key
  int64_t max_length = 32;      // greedy decoding length (incl. the decoder start token); inverter.max_length_eval
  int64_t batch_size = 256;     // rows per decode and per query call
  int64_t shard_rows = 20000;
  int64_t max_rows = 0;         // the first N training rows only (stage 4 needs steps × batch); 0 = all
  std::string dtype = "float16";  // float16 | float32, as the other caches
  int64_t queries_per_text = 1;
  GenerateOptions decoding;       // hypotheses.*: greedy unless set; recorded in the digest and the manifest   // k: a hypothesis' embedding is the mean of k queries (mean_of_queries)
  // What the inverter decodes rows [begin, end) from; null: the training cache's noisy rows y. The clean corrector's
  // reference (eval/reference.h) passes the clean rows, tagged "clean" in the source digest and the manifest.
  std::function<at::Tensor(int64_t, int64_t)> input_rows;
  std::string input_tag;
  // The hypotheses.* keys besides the decoding's (decoding_from_config), listed once (core/fields.h).
  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("max_rows", s.max_rows), v("batch_size", s.batch_size), v("queries_per_text", s.queries_per_text);
  }
  // From config: fields(), cache.shard_rows, cache.dtype, max_length = inverter.max_length_eval, and for a split
  // other than train max_rows = train.heldout_rows (the held-out CE's rows); run_dir/cache/<source_split> →
  // run_dir/cache/<split>.
  static HypothesisCacheOptions from_config(const Config& cfg, const std::string& run_dir,
                                            const std::string& source_split = "train",
                                            const std::string& split = "hyp-train");
};

struct HypothesisCacheResult {
  int64_t rows = 0, shards = 0, shards_built = 0;  // shards_built: by this rank in this run
  bool already_complete = false;
  std::string source_sha256;
  double seconds = 0;
};

// "hyp/r<round>/<id>/<text>".
std::string hypothesis_query_key(int64_t round, int64_t id, const std::string& text);

// Collective over comm: every rank calls it with the same models. The models are put in eval mode and used on
// the device their parameters are on. dae null: the inverter reads y itself (noisy-vec2text's hypotheses).
HypothesisCacheResult build_hypothesis_cache(const HypothesisCacheOptions& opt, InverterImpl& inverter, DaeImpl* dae,
                                             const SpmTokenizer& tokenizer, const NoisyEmbedder& embedder,
                                             Communicator& comm);

}  // namespace daei
