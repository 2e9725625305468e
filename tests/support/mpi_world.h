// Shared by the MPI tests: the world communicator and a temporary folder every rank agrees on.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

#include "dist/communicator.h"

namespace daei::test {

inline Communicator& world() {
  static auto c = make_mpi_communicator();
  return *c;
}

// Rank 0 creates a fresh folder under the temp directory and broadcasts its path.
inline std::string shared_dir(const std::string& name) {
  namespace fs = std::filesystem;
  std::string p;
  if (world().is_root()) {
    p = (fs::temp_directory_path() / fmt::format("daei-mpi-{}-{}-np{}", name, ::getpid(), world().size())).string();
    fs::remove_all(p);
    fs::create_directories(p);
  }
  return world().broadcast(p, 0);
}

}  // namespace daei::test
