// Rank-0 progress lines with rate and ETA, at most one every `every_s` seconds:
//   [stage1] step 120/2500 (4.8%)  3.1 step/s  ETA 12m48s  loss 0.0123
#pragma once
#include <chrono>
#include <string>

namespace daei {

class Progress {
 public:
  Progress(std::string tag, int64_t total, std::string unit, double every_s = 10.0, int64_t start = 0);
  // Call as work advances; prints when due (or when done == total). `extra` is appended to the line.
  void update(int64_t done, const std::string& extra = "");
  double rate() const;  // units per second since construction
  static std::string format_duration(double seconds);

 private:
  std::string tag_, unit_;
  int64_t total_, start_, last_done_ = 0;
  double every_s_;
  std::chrono::steady_clock::time_point t0_, last_print_;
};

}  // namespace daei
