#include "core/fsutil.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace daei {
namespace fs = std::filesystem;

std::string temp_sibling(const std::string& path) { return fmt::format("{}.tmp-{}", path, ::getpid()); }

void write_file_atomic(const std::string& path, const std::string& content) {
  auto parent = fs::path(path).parent_path();
  if (!parent.empty()) make_dirs(parent.string());
  const std::string tmp = temp_sibling(path);
  {
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) DAEI_FAIL("{}: cannot write: {}", tmp, std::strerror(errno));
    bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
    ok = (std::fflush(f) == 0) && ok;
    ok = (::fsync(::fileno(f)) == 0) && ok;
    ok = (std::fclose(f) == 0) && ok;
    if (!ok) {
      std::remove(tmp.c_str());
      DAEI_FAIL("{}: write failed: {}", path, std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    DAEI_FAIL("{}: cannot rename into place: {}", path, std::strerror(errno));
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) DAEI_FAIL("{}: cannot read: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool stays_inside(const std::string& rel) {
  if (!rel.empty() && rel[0] == '/') return false;
  if (rel.find('\0') != std::string::npos) return false;
  for (size_t b = 0; b <= rel.size();) {
    size_t e = rel.find('/', b);
    if (e == std::string::npos) e = rel.size();
    if (rel.compare(b, e - b, "..") == 0) return false;
    b = e + 1;
  }
  return true;
}

bool file_exists(const std::string& path) { return fs::exists(path); }

void make_dirs(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) DAEI_FAIL("{}: cannot create directory: {}", path, ec.message());
}

}  // namespace daei
