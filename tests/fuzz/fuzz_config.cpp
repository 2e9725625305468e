// libFuzzer target for the YAML config loader (src/core/config.cpp): a config file's text layered over the
// built-in defaults, then validated; or, when the input starts with '=', a --set assignment; or, starting with '#',
// a defaults text whose value rules are parsed. Any input must end as a daei::Error (a usage error naming the key
// or file) or a config that passes its own rules and dumps; never a crash, a sanitizer report or another exception.
// Build and run: tests/fuzz/run_fuzz.sh
#include <cstddef>
#include <cstdint>
#include <string>

#include <yaml-cpp/yaml.h>

#include "core/config.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    if (!text.empty() && text[0] == '#') {
      (void)daei::parse_config_rules(text);
      return 0;
    }
    static const daei::Config base = daei::Config::defaults();  // parsed once; each input gets a deep copy
    (void)daei::Config::rules();
    daei::Config c(YAML::Clone(base.root()));
    if (!text.empty() && text[0] == '=') {
      c.set(text.substr(1));
    } else {
      YAML::Node overlay;
      try {
        overlay = YAML::Load(text);
      } catch (const YAML::Exception&) {
        return 0;  // Config::merge_file turns this into "invalid YAML" (a UsageError)
      }
      if (!overlay || overlay.IsNull() || !overlay.IsMap()) return 0;  // merge_file refuses these
      c.merge_yaml(overlay, "fuzz.yaml");
    }
    c.validate();
    (void)c.dump();
    // A validated config's typed reads must not throw anything but daei errors.
    (void)c.integer("stage1.batch_size");
    (void)c.real("stage1.lr");
    (void)c.str("log.level");
    (void)c.reals("embedder.sigma");
  } catch (const daei::Error&) {
  }
  return 0;
}
