#include "stages/loop/stage_files.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace daei {
using nlohmann::json;

CheckpointState parse_checkpoint_state(const std::string& text, const std::string& sp) {
  const json st = json::parse(text, nullptr, false);
  DAEI_CHECK(!st.is_discarded() && st.is_object(), "{}: not valid JSON", sp);
  // Typed reads: a wrong type (a schema that is a number, a step that is a string) threw json's type_error past
  // the resume's daei::Error handlers (probes of fuzz_stage_files).
  auto need = [&](const json& j, const char* key) -> int64_t {
    DAEI_CHECK(j.is_object() && j.contains(key), "{}: key '{}' is missing", sp, key);
    DAEI_CHECK(j.at(key).is_number_integer(), "{}: key '{}' is not an integer", sp, key);
    return j.at(key).get<int64_t>();
  };
  const auto sc = st.find("schema");
  const std::string schema = sc != st.end() && sc->is_string() ? sc->get<std::string>() : "";
  DAEI_CHECK(schema == "daei.checkpoint.v1" || schema == "daei.checkpoint.v2", "{}: unknown checkpoint schema '{}'",
             sp, schema);
  CheckpointState out;
  out.global_batch = need(st, "global_batch");
  DAEI_CHECK(st.contains("sampler"), "{}: key 'sampler' is missing", sp);
  out.n_rows = need(st.at("sampler"), "n_rows");
  out.step = need(st, "step");
  out.world_size = need(st, "world_size");
  return out;
}

std::string metrics_lines_until(const std::string& text, int64_t step) {
  std::string kept;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    // A damaged line (not an object, a step that is not an integer) is dropped like an unreadable one: json::value
    // threw its type_error past the resume (fuzz_stage_files: {"step": {"dae": 0.001}}).
    const auto j = json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    const auto it = j.find("step");
    if (it != j.end() && !it->is_number_integer()) continue;
    if ((it == j.end() ? 0 : it->get<int64_t>()) <= step) kept += line + "\n";
  }
  return kept;
}

}  // namespace daei
