// The option structs of the config sections several stages share (what and why: shared_options.h).
#include "stages/recipes/shared_options.h"

#include "core/config.h"
#include "core/fields.h"

namespace daei {

InverterOptions InverterOptions::from_config(const Config& cfg) {
  InverterOptions o;
  fields(o, config_reader(cfg, "inverter"));
  return o;
}

HeldoutOptions HeldoutOptions::from_config(const Config& cfg) {
  HeldoutOptions o;
  fields(o, config_reader(cfg, "train"));
  return o;
}

}  // namespace daei
