// GoogleTest main for tests run under mpirun: MPI is initialised once, only rank 0 prints, and a failure on any
// rank fails the process (mpirun then exits non-zero).
#include <gtest/gtest.h>
#include <mpi.h>

#include "core/log.h"
#include "dist/mpi_process.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const auto& info = daei::MpiProcess::init(&argc, &argv);
  daei::logging::init(info.rank, info.world, false, "warn");
  if (info.rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  daei::MpiProcess::finalize();
  return worst;
}
