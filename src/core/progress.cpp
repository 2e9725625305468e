#include "core/progress.h"

#include <cmath>

#include "core/log.h"

namespace daei {

Progress::Progress(std::string tag, int64_t total, std::string unit, double every_s, int64_t start)
    : tag_(std::move(tag)), unit_(std::move(unit)), total_(total), start_(start), last_done_(start),
      every_s_(every_s), t0_(std::chrono::steady_clock::now()), last_print_(t0_) {}

std::string Progress::format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  auto t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

double Progress::rate() const {
  double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  return el > 0 ? (last_done_ - start_) / el : 0.0;
}

void Progress::update(int64_t done, const std::string& extra) {
  last_done_ = done;
  auto now = std::chrono::steady_clock::now();
  bool finished = done >= total_;
  if (!finished && std::chrono::duration<double>(now - last_print_).count() < every_s_) return;
  last_print_ = now;
  double r = rate();
  double eta = r > 0 ? (total_ - done) / r : NAN;
  LOG_INFO("[{}] {} {}/{} ({:.1f}%)  {:.3g} {}/s  ETA {}{}{}", tag_, unit_, done, total_,
           total_ > 0 ? 100.0 * done / total_ : 100.0, r, unit_, finished ? "0s" : format_duration(eta),
           extra.empty() ? "" : "  ", extra);
}

}  // namespace daei
