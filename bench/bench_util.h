// Helpers of the benchmark program (bench/entries.cpp): its --key value arguments, a monotonic clock, and the page
// faults and peak RSS a measurement adds.
#pragma once
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <map>
#include <string>
#include <nlohmann/json.hpp>

namespace daei::bench {

inline std::map<std::string, std::string> g_args;
// --k as a whole integer of at least `lo` (def when absent); anything else is std::invalid_argument naming the flag.
inline int64_t arg(const std::string& k, int64_t def, int64_t lo = INT64_MIN) {
  if (!g_args.count(k)) return def;
  const std::string& v = g_args[k];
  size_t used = 0;
  int64_t x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size()) throw std::invalid_argument("--" + k + " '" + v + "' is not an integer");
  if (x < lo) throw std::invalid_argument("--" + k + " " + v + " is below " + std::to_string(lo));
  return x;
}
// --k 0|1 (def when absent).
inline bool flag_arg(const std::string& k, bool def) {
  const int64_t x = arg(k, def ? 1 : 0, 0);
  if (x > 1) throw std::invalid_argument("--" + k + " must be 0 or 1, got " + g_args[k]);
  return x == 1;
}
inline std::string sarg(const std::string& k, const std::string& def) { return g_args.count(k) ? g_args[k] : def; }

inline double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Usage {
  long minflt0;
  Usage() { minflt0 = get().ru_minflt; }
  static rusage get() {
    rusage r{};
    getrusage(RUSAGE_SELF, &r);
    return r;
  }
  void fill(nlohmann::json& j) const {
    auto r = get();
    j["minflt"] = r.ru_minflt - minflt0;
    j["maxrss_kb"] = r.ru_maxrss;
  }
};

}  // namespace daei::bench
