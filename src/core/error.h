// Errors and checked calls. Every failure becomes one daei::Error whose message is the one line a user sees;
// checked-call macros add the file and line of the call (llm.c style).
#pragma once
#include <stdexcept>
#include <string>
#include <fmt/format.h>

namespace daei {

// Exit codes shared by every subcommand.
enum ExitCode : int { kExitOk = 0, kExitError = 1, kExitUsage = 2, kExitStopped = 75 };

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// A usage error (bad flag, bad config key): exit code 2.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& msg) : Error(msg) {}
};

[[noreturn]] void fail_at(const char* file, int line, const std::string& msg);

}  // namespace daei

#define DAEI_FAIL(...) throw ::daei::Error(fmt::format(__VA_ARGS__))
#define DAEI_CHECK(cond, ...)                                      \
  do {                                                             \
    if (!(cond)) throw ::daei::Error(fmt::format(__VA_ARGS__));    \
  } while (0)
// For calls whose failure is a bug or an environment problem rather than bad input: names file:line.
#define DAEI_ASSERT(cond, ...)                                                         \
  do {                                                                                 \
    if (!(cond)) ::daei::fail_at(__FILE__, __LINE__, fmt::format(__VA_ARGS__));        \
  } while (0)
