#include "model/release/embedding_request.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace daei {

std::string parse_embedding_request(const std::string& body, int64_t max_batch, std::vector<std::string>& texts) {
  using nlohmann::json;
  texts.clear();
  json j;
  try {
    j = json::parse(body);  // also rejects invalid UTF-8 inside strings
  } catch (const std::exception&) {
    return "body is not valid JSON";
  }
  if (!j.is_object()) return "body must be a JSON object";
  if (j.contains("model") && !j["model"].is_string() && !j["model"].is_null()) return "\"model\" must be a string";
  if (!j.contains("input")) return "missing field \"input\"";
  const auto& in = j["input"];
  if (in.is_string()) {
    texts.push_back(in.get<std::string>());
  } else if (in.is_array()) {
    if (in.empty()) return "\"input\" is empty";
    if (int64_t(in.size()) > max_batch)
      return fmt::format("\"input\" has {} texts, the limit is {}", in.size(), max_batch);
    for (const auto& t : in) {
      if (!t.is_string()) {
        texts.clear();
        return "\"input\" must be a string or an array of strings";
      }
      texts.push_back(t.get<std::string>());
    }
  } else {
    return "\"input\" must be a string or an array of strings";
  }
  return "";
}

}  // namespace daei
