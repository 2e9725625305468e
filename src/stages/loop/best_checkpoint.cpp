#include "stages/loop/best_checkpoint.h"

#include <nlohmann/json.hpp>

#include <filesystem>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"

namespace daei {

namespace fs = std::filesystem;

BestKeeper::BestKeeper(const std::string& stage_dir) : dir_(stage_dir + "/best") {
  const std::string meta = dir_ + "/best.json";
  if (!file_exists(meta)) return;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(meta));
    step_ = j.at("step").get<int64_t>();
    score_ = j.at("score").get<double>();
  } catch (const nlohmann::json::exception& e) {
    DAEI_FAIL("{}: not a best-model record ({}); remove {} to select again", meta, e.what(), dir_);
  }
}

bool BestKeeper::offer(int64_t step, double score, const std::function<void(const std::string&)>& save) {
  if (has() && !(score > score_)) return false;  // ties keep the earlier model
  const std::string tmp = temp_sibling(dir_);
  fs::remove_all(tmp);
  make_dirs(tmp);
  save(tmp);
  write_file_atomic(tmp + "/best.json", nlohmann::json{{"step", step}, {"score", score}}.dump(2) + "\n");
  fs::remove_all(dir_);
  fs::rename(tmp, dir_);
  step_ = step;
  score_ = score;
  LOG_INFO("[select] best held-out score {:.5g} at step {}: kept in {}", score, step, dir_);
  return true;
}

}  // namespace daei
