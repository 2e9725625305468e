// An exclusive lock on a folder that one command writes (a training stage's folder, a cache split): flock on
// DIR/.lock, which names the holder ("host H pid P"). A second process is refused with an error naming that holder.
// Within one process the lock is shared: a command that locks a stage folder before its Trainer does (to check the
// folder and save config.yaml under the lock) and the Trainer itself both hold it; the last holder releases it.
#pragma once
#include <string>

namespace daei {

class DirLock {
 public:
  DirLock() = default;
  // Creates dir if needed and takes the lock; throws Error "DIR is in use by another daei process (host H pid P)".
  explicit DirLock(const std::string& dir);
  ~DirLock();
  DirLock(DirLock&& o) noexcept : key_(std::move(o.key_)) { o.key_.clear(); }
  DirLock& operator=(DirLock&& o) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  bool held() const { return !key_.empty(); }
  void release();

 private:
  std::string key_;  // the lock file's absolute path ("" when not held)
};

// True when a process of that id runs on this host (used to tell a dead writer's temporaries from a live one's).
bool pid_alive(long pid);

}  // namespace daei
