// libFuzzer target for the stage-folder files a resume reads back (src/stages/loop/stage_files.cpp, and
// src/data/run_layout.cpp's verify_done_folder for a checkpoint's or final/'s DONE): any text must be refused with a
// daei::Error naming the file (state.json), give a verdict (DONE: "" or what is wrong) or kept lines (metrics.jsonl).
// Byte 0 picks the file. DONE is checked in a temporary folder holding files a and sub/b. Build: tests/fuzz/run_fuzz.sh
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/fsutil.h"
#include "data/run_layout.h"
#include "fuzz_util.h"
#include "stages/loop/stage_files.h"

using daei::fuzz::require;
namespace fs = std::filesystem;

namespace {
// A checkpoint folder: DONE (the fuzz input) beside a and sub/b, created once per process.
const std::string& done_folder() {
  static const std::string dir = [] {
    std::string d = (fs::temp_directory_path() / ("daei_fuzz_done_" + std::to_string(getpid()))).string();
    fs::create_directories(d + "/sub");
    daei::write_file_atomic(d + "/a", "x");
    daei::write_file_atomic(d + "/sub/b", "y");
    return d;
  }();
  return dir;
}

// A DONE that verifies lists only files inside its folder.
void check_done(const std::string& text) {
  const std::string& dir = done_folder();
  daei::write_file_atomic(dir + "/DONE", text);
  const std::string why = daei::verify_done_folder(dir);
  if (!why.empty()) return;
  auto j = nlohmann::json::parse(text);
  for (const auto& [name, sha] : j.at("files").items()) require(name == "a" || name == "sub/b");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text = daei::fuzz::rest(data, size);
  const std::string src = "fuzz/stage1/ckpt-00000010/state.json";
  try {
    switch (data[0] % 3) {
      case 0:
        daei::parse_checkpoint_state(text, src);
        break;
      case 1: {
        const std::string kept = daei::metrics_lines_until(text, 100);
        require(kept.empty() || kept.back() == '\n');
        break;
      }
      default:
        check_done(text);
    }
  } catch (const daei::Error& e) {
    daei::fuzz::require_names(e, data[0] % 3 == 0 ? src : done_folder());
  }
  return 0;
}
