#include "core/dir_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include "core/error.h"
#include "core/fsutil.h"

namespace daei {
namespace {

struct Held {
  int fd = -1;
  int count = 0;
};
std::mutex g_mutex;
std::map<std::string, Held>& registry() {
  static std::map<std::string, Held> h;
  return h;
}

}  // namespace

bool pid_alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

DirLock::DirLock(const std::string& dir) {
  make_dirs(dir);
  const std::string path = std::filesystem::absolute(std::filesystem::path(dir) / ".lock").lexically_normal().string();
  std::lock_guard<std::mutex> g(g_mutex);
  auto it = registry().find(path);
  if (it != registry().end()) {  // this process holds it already
    ++it->second.count;
    key_ = path;
    return;
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  DAEI_CHECK(fd >= 0, "{}: cannot open: {}", path, std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    std::string holder;
    try {
      holder = read_file(path);
    } catch (const std::exception&) {
    }
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    DAEI_CHECK(err != EWOULDBLOCK, "{} is in use by another daei process ({}); wait for it or stop it", dir,
               holder.empty() ? "unknown holder" : holder);
    DAEI_FAIL("{}: cannot take an exclusive lock ({}); this file system does not support flock — put run.root on a "
              "local or lock-capable file system",
              path, std::strerror(err));
  }
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  const std::string me = fmt::format("host {} pid {}\n", host, ::getpid());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    const int err = errno;
    ::close(fd);
    DAEI_FAIL("{}: cannot write: {}", path, std::strerror(err));
  }
  registry()[path] = Held{fd, 1};
  key_ = path;
}

void DirLock::release() {
  if (key_.empty()) return;
  std::lock_guard<std::mutex> g(g_mutex);
  auto it = registry().find(key_);
  if (it != registry().end() && --it->second.count == 0) {
    ::close(it->second.fd);  // releases the flock
    registry().erase(it);
  }
  key_.clear();
}

DirLock::~DirLock() { release(); }

DirLock& DirLock::operator=(DirLock&& o) noexcept {
  if (this != &o) {
    release();
    key_ = std::move(o.key_);
    o.key_.clear();
  }
  return *this;
}

}  // namespace daei
