#include "core/error.h"

namespace daei {

void fail_at(const char* file, int line, const std::string& msg) {
  std::string f = file;
  auto pos = f.find("src/");
  if (pos != std::string::npos) f = f.substr(pos);
  throw Error(fmt::format("{} ({}:{})", msg, f, line));
}

}  // namespace daei
