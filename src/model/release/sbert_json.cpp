#include "model/release/sbert_json.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fsutil.h"

namespace daei {
namespace {
using nlohmann::json;

json parse_object(const std::string& text, const std::string& source) {
  json j = json::parse(text, nullptr, false);
  DAEI_CHECK(!j.is_discarded() && j.is_object(), "{}: not a JSON object", source);
  return j;
}

// j[key] as T, `fallback` when absent or null; a wrong type is an error naming the file and key (json::value
// would throw the library's type_error, which names neither).
template <class T>
T value_or(const json& j, const char* key, T fallback, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception& e) {
    DAEI_FAIL("{}: key '{}': {}", source, key, e.what());
  }
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::vector<SbertModule> parse_sbert_modules(const std::string& text, const std::string& source) {
  json m = json::parse(text, nullptr, false);
  DAEI_CHECK(!m.is_discarded() && m.is_array(), "{}: expected a JSON array of modules", source);
  std::vector<SbertModule> out;
  for (const auto& mod : m) {
    DAEI_CHECK(mod.is_object(), "{}: a module is not a JSON object", source);
    const std::string type = value_or<std::string>(mod, "type", "", source);
    const std::string path = value_or<std::string>(mod, "path", "", source);
    // A downloaded model must not point outside itself.
    DAEI_CHECK(stays_inside(path), "{}: module path '{}' must be a folder inside the model directory", source, path);
    SbertModuleKind k;
    if (ends_with(type, "Transformer")) k = SbertModuleKind::transformer;
    else if (ends_with(type, "Pooling")) k = SbertModuleKind::pooling;
    else if (ends_with(type, "Dense")) k = SbertModuleKind::dense;
    else if (ends_with(type, "Normalize")) k = SbertModuleKind::normalize;
    else DAEI_FAIL("{}: module type '{}' is not supported (Transformer, Pooling, Dense, Normalize)", source, type);
    out.push_back({k, path});
  }
  DAEI_CHECK(std::any_of(out.begin(), out.end(), [](const auto& x) { return x.kind == SbertModuleKind::pooling; }),
             "{}: no Pooling module", source);
  return out;
}

std::string parse_pooling_mode(const std::string& text, const std::string& source) {
  const json p = parse_object(text, source);
  const bool mean = value_or(p, "pooling_mode_mean_tokens", false, source);
  const bool cls = value_or(p, "pooling_mode_cls_token", false, source);
  DAEI_CHECK(mean != cls, "{}: exactly one of pooling_mode_mean_tokens and pooling_mode_cls_token must be true "
             "(others are not supported)", source);
  return mean ? "mean" : "cls";
}

int64_t sbert_max_length(const std::string& text, const std::string& source, int64_t max_length) {
  const json j = parse_object(text, source);
  if (j.contains("max_seq_length") && j["max_seq_length"].is_number_integer())
    max_length = std::min<int64_t>(max_length, std::max<int64_t>(2, j["max_seq_length"].get<int64_t>()));
  return max_length;
}

std::string parse_model_type(const std::string& text, const std::string& source, const std::string& fallback) {
  return value_or(parse_object(text, source), "model_type", fallback, source);
}

bool parse_do_lower_case(const std::string& text, const std::string& source) {
  return value_or(parse_object(text, source), "do_lower_case", true, source);
}

std::string parse_dense_activation(const std::string& text, const std::string& source) {
  const std::string act = value_or<std::string>(parse_object(text, source), "activation_function",
                                                "torch.nn.modules.linear.Identity", source);
  if (act.find("Tanh") != std::string::npos) return "tanh";
  DAEI_CHECK(act.find("Identity") != std::string::npos, "{}: activation {} not supported", source, act);
  return "identity";
}

}  // namespace daei
