#include "core/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace daei::logging {
namespace {
int g_rank = 0, g_world = 1;
std::string pattern() {
  return fmt::format("[%Y-%m-%d %H:%M:%S] [{}/{}] %^%L%$ %v", g_rank, g_world);
}
}  // namespace

void init(int rank, int world, bool log_all_ranks, const std::string& level) {
  g_rank = rank;
  g_world = world;
  auto logger = spdlog::default_logger();
  if (logger->sinks().empty() || logger->name() != "daei") {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    logger = std::make_shared<spdlog::logger>("daei", sink);
    spdlog::set_default_logger(logger);
  }
  logger->set_pattern(pattern());
  auto lvl = spdlog::level::from_str(level);
  if (rank != 0 && !log_all_ranks && lvl < spdlog::level::warn) lvl = spdlog::level::warn;
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::info);
}

void add_file(const std::string& path) {
  if (g_rank != 0) return;
  auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false);
  sink->set_pattern(pattern());
  spdlog::default_logger()->sinks().push_back(sink);
}

int rank() { return g_rank; }
int world() { return g_world; }

}  // namespace daei::logging
