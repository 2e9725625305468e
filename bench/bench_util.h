// Helpers of the benchmark program (bench/entries.cpp): its --key value arguments, a monotonic clock, and the page
// faults and peak RSS a measurement adds.
#pragma once
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <nlohmann/json.hpp>

namespace daei::bench {

inline std::map<std::string, std::string> g_args;
inline int64_t arg(const std::string& k, int64_t def) { return g_args.count(k) ? std::stoll(g_args[k]) : def; }
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
