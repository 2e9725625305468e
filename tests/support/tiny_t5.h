// The small T5 the unit tests build with seeded random weights: d_model 32, 4 heads of 8, d_ff 64, 1+1 layers,
// 8 relative-position buckets up to 16, no dropout, a 40-piece vocabulary. Tests that need another shape change
// the fields they name.
#pragma once
#include "model/net/t5_config.h"

namespace daei::test {

inline T5Config tiny_t5_config() {
  T5Config c;
  c.vocab_size = 40;
  c.d_model = 32;
  c.d_kv = 8;
  c.d_ff = 64;
  c.num_layers = 1;
  c.num_decoder_layers = 1;
  c.num_heads = 4;
  c.relative_attention_num_buckets = 8;
  c.relative_attention_max_distance = 16;
  c.dropout_rate = 0.0;
  return c;
}

}  // namespace daei::test
