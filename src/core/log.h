// Logging: spdlog with time, rank/world and a [component] tag written by the caller:
//   LOG_INFO("[data] {} rows", n);
// Rank 0 logs info and up; other ranks warnings and errors unless log_all_ranks.
#pragma once
#include <string>
#include <spdlog/spdlog.h>

namespace daei::logging {

void init(int rank, int world, bool log_all_ranks, const std::string& level = "info");
// Adds a file sink (rank 0 only; a no-op elsewhere). Appends, so resumed runs keep one log.
void add_file(const std::string& path);
int rank();
int world();

}  // namespace daei::logging

#define LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
