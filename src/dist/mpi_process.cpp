#include "dist/mpi_process.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdlib>

#include "core/error.h"
#include "dist/mpi_check.h"

namespace daei {
namespace {
ProcessInfo g_info;
bool g_init = false;
}  // namespace

void check_launch(int world, const char* slurm_ntasks) {
  if (world != 1 || !slurm_ntasks) return;
  int n = std::atoi(slurm_ntasks);
  if (n > 1)
    DAEI_FAIL("[dist] SLURM_NTASKS={} but MPI reports a world of 1: srun started the ranks without PMIx, so each "
              "is a lone rank 0. Launch with `mpirun` inside the allocation (launch/slurm/*.sbatch), or with "
              "`srun --mpi=pmix` where `srun --mpi=list` shows pmix.",
              n);
}

const ProcessInfo& MpiProcess::init(int* argc, char*** argv) {
  if (g_init) return g_info;
  int already = 0;
  MPI_CHECK(MPI_Initialized(&already));
  if (!already) {
    int provided = 0;
    MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  }
  g_init = true;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g_info.rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g_info.world));
  MPI_Comm node;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_info.rank, MPI_INFO_NULL, &node));
  MPI_CHECK(MPI_Comm_rank(node, &g_info.local_rank));
  MPI_CHECK(MPI_Comm_size(node, &g_info.local_size));
  MPI_CHECK(MPI_Comm_free(&node));
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  g_info.host = host;
  check_launch(g_info.world, std::getenv("SLURM_NTASKS"));
  return g_info;
}

bool MpiProcess::initialized() { return g_init; }
const ProcessInfo& MpiProcess::info() { return g_info; }

void MpiProcess::finalize() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (g_init && !fin) MPI_Finalize();
}

}  // namespace daei
