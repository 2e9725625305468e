// A fresh folder under the system's temp directory, "daei-<tag>-<pid>", removed with everything in it at scope exit.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

struct TempDir {
  std::filesystem::path p;
  explicit TempDir(const std::string& tag) {
    p = std::filesystem::temp_directory_path() / ("daei-" + tag + "-" + std::to_string(getpid()));
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
  }
  ~TempDir() { std::filesystem::remove_all(p); }
  std::string str() const { return p.string(); }
};
