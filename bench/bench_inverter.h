// The inverter of the stage-2 bench entries (bench/runner.py's S2 sizes), from the command-line flags both bench
// programs take (bench_entries and bench_peers): --dim --repeat --vocab --d-model --d-kv --heads --d-ff --layers
// --dropout-pct.
#pragma once
#include "bench_util.h"
#include "model/attack/inverter.h"

namespace daei::bench {

inline InverterConfig stage2_inverter_config() {
  InverterConfig c;
  c.dim = arg("dim", 100);
  c.repeat = arg("repeat", 16);
  c.t5.vocab_size = arg("vocab", 4096);
  c.t5.d_model = arg("d-model", 256);
  c.t5.d_kv = arg("d-kv", 32);
  c.t5.num_heads = arg("heads", 8);
  c.t5.d_ff = arg("d-ff", 1024);
  c.t5.num_layers = c.t5.num_decoder_layers = arg("layers", 2);
  c.t5.feed_forward_proj = "relu";
  c.t5.dropout_rate = arg("dropout-pct", 10) / 100.0;
  return c;
}

}  // namespace daei::bench
