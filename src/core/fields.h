// One list of a struct's fields serves every mapping of it: a struct declares
//   template <class Self, class Visit> static void fields(Self& s, Visit&& v) { v("name", s.name); ... }
// once, and these helpers read it from / write it to JSON (Hugging Face config.json, dae.json) or read it from a
// config section. Adding a field is then one line, and the mappings cannot disagree. A model's folder (its config
// beside model.safetensors) is written by core/safetensors.h's save_module_folder.
#pragma once
#include <nlohmann/json.hpp>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/config.h"
#include "core/error.h"

namespace daei {

// Fields present (and not null) in `j` are read; the others keep their defaults. A wrong type names the key.
template <class T>
void read_json_fields(T& obj, const nlohmann::json& j, const std::string& source) {
  T::fields(obj, [&](const char* key, auto& field) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return;
    using F = std::decay_t<decltype(field)>;
    if constexpr (std::is_integral_v<F> && !std::is_same_v<F, bool>) {
      // json converts a float such as 2.5e92 to an integer field by a cast outside its range (undefined behaviour,
      // found by fuzz_model_json): a float is taken only when it is a whole number inside the field's range.
      if (it->is_number_float()) {
        const double v = it->template get<double>();
        DAEI_CHECK(v == static_cast<double>(static_cast<int64_t>(v > 9.2e18 || v < -9.2e18 ? 0 : v)) &&
                       v >= double(std::numeric_limits<F>::min()) && v <= double(std::numeric_limits<F>::max()),
                   "{}: key '{}': {} is not a whole number in range", source, key, v);
      }
    }
    try {
      it->get_to(field);
    } catch (const std::exception& e) {
      DAEI_FAIL("{}: key '{}': {}", source, key, e.what());
    }
  });
}

template <class T>
void write_json_fields(const T& obj, nlohmann::json& j) {
  T::fields(obj, [&](const char* key, const auto& field) { j[key] = field; });
}

// Parses `text` as a JSON object (`source` names it in errors) and reads T's fields from it, as read_json_fields.
// Returns the object, for keys beyond T's fields.
template <class T>
nlohmann::json read_json_text_fields(T& obj, const std::string& text, const std::string& source) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  DAEI_CHECK(!j.is_discarded() && j.is_object(), "{}: not a JSON object", source);
  read_json_fields(obj, j, source);
  return j;
}

// obj.validate(), whose refusal then names `source`: a config read from a file names the file when its values break
// the rules (fuzz_model_json found "bert config: hidden_size 32 not divisible by 12 heads" naming no file).
template <class T>
void validate_from(const T& obj, const std::string& source) {
  try {
    obj.validate();
  } catch (const Error& e) {
    DAEI_FAIL("{}: {}", source, e.what());
  }
}

// The text of a JSON object (Hugging Face's config.json, dae.json): `head`'s keys and T's fields, indented by 2,
// ending in a newline.
template <class T>
std::string json_fields_text(const T& obj, nlohmann::json head = nlohmann::json::object()) {
  write_json_fields(obj, head);
  return head.dump(2) + "\n";
}

// A visitor for T::fields that reads `section.name` into each field, with the getter of the field's type (bool:
// flag, integer: integer, floating point: real, list of numbers: reals, list of strings: strings, else str). A key the config lacks is skipped (the field keeps its
// value) when skip_missing, else it fails as the getter fails: option structs whose keys the defaults all define
// keep that failure. A struct whose keys lie in two sections (train.* and stageK.*) lists each section's fields in
// its own function and reads each with its own visitor.
inline auto config_reader(const Config& cfg, const std::string& section, bool skip_missing = false) {
  return [&cfg, section, skip_missing](const char* key, auto& field) {
    const std::string k = section + "." + key;
    if (skip_missing && !cfg.has(k)) return;
    using F = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<F, bool>)
      field = cfg.flag(k);
    else if constexpr (std::is_integral_v<F>)
      field = static_cast<F>(cfg.integer(k));
    else if constexpr (std::is_floating_point_v<F>)
      field = static_cast<F>(cfg.real(k));
    else if constexpr (std::is_same_v<F, std::vector<double>>)
      field = cfg.reals(k);
    else if constexpr (std::is_same_v<F, std::vector<std::string>>)
      field = cfg.strings(k);
    else
      field = cfg.str(k);
  };
}

// Reads `section.name` for each field the config has (a field without a config key keeps its value).
template <class T>
void read_config_fields(T& obj, const Config& cfg, const std::string& section) {
  T::fields(obj, config_reader(cfg, section, /*skip_missing=*/true));
}

}  // namespace daei
