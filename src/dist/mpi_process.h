// MPI start-up and the facts derived from it: rank, world, local rank (MPI_Comm_split_type), host map.
// Rank and world come from MPI, never from environment variables.
#pragma once
#include <string>

namespace daei {

struct ProcessInfo {
  int rank = 0, world = 1, local_rank = 0, local_size = 1;
  std::string host;
};

class MpiProcess {
 public:
  // MPI_Init_thread (once). Then the srun-without-PMIx check: world 1 while SLURM_NTASKS > 1 throws.
  static const ProcessInfo& init(int* argc, char*** argv);
  static bool initialized();
  static const ProcessInfo& info();
  static void finalize();
};

// Throws when world == 1 but SLURM_NTASKS says more tasks were started (srun without PMIx starts singletons).
void check_launch(int world, const char* slurm_ntasks);

}  // namespace daei
