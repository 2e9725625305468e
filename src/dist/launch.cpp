// Ranks' start, backend choice and failure report (what and why: launch.h).
#include "dist/launch.h"

#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "core/config.h"
#include "core/error.h"
#include "core/signals.h"
#include "dist/communicator.h"

namespace daei {
namespace {
// A private communicator on which failing ranks find out whether every rank failed (then rank 0 alone reports)
// or only some (then each reports and the job is aborted: the others may be waiting in a collective).
MPI_Comm g_error_comm = MPI_COMM_NULL;
}  // namespace

const ProcessInfo& start_ranks(int* argc, char*** argv) {
  // No TCP transport between ranks (there are none) and no supporting daemon for a singleton, so nothing listens on
  // 0.0.0.0 / [::].
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMIX_RANK") && !std::getenv("PMI_RANK")) {
    ::setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
    ::setenv("OMPI_MCA_btl", "self", 0);
  }
  const ProcessInfo& proc = MpiProcess::init(argc, argv);
  if (proc.world > 1) MPI_Comm_dup(MPI_COMM_WORLD, &g_error_comm);
  signals::exit_when_launcher_dies();
  return proc;
}

std::unique_ptr<Communicator> make_communicator(const Config& cfg, const ProcessInfo& proc) {
  const std::string backend = cfg.str("dist.backend");
  if (backend == "local") {
    DAEI_CHECK(proc.world == 1, "dist.backend=local but MPI started {} ranks", proc.world);
    return std::make_unique<LocalCommunicator>();
  }
  if (backend == "nccl" || (backend == "auto" && nccl_communicator_available()))
    return make_nccl_communicator(proc.local_rank);  // device = local rank modulo count, inside
  if (backend == "mpi" || backend == "auto") return make_mpi_communicator();
  throw UsageError(fmt::format("dist.backend must be auto, local, mpi or nccl, got '{}'", backend));
}

int report_failure(const std::string& msg, int rc) {
  const bool multi = MpiProcess::initialized() && MpiProcess::info().world > 1 && g_error_comm != MPI_COMM_NULL;
  if (!multi) {
    std::cerr << "daei: error: " << msg << std::endl;
    return rc;
  }
  const int rank = MpiProcess::info().rank;
  MPI_Request req;
  int all = 0;
  if (MPI_Ibarrier(g_error_comm, &req) == MPI_SUCCESS) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (!all && std::chrono::steady_clock::now() < deadline) {
      MPI_Test(&req, &all, MPI_STATUS_IGNORE);
      if (!all) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (all) {  // every rank failed (a config or usage error, or a decision all ranks took): rank 0 says it once
    if (rank == 0) std::cerr << "daei: error: " << msg << std::endl;
    return rc;
  }
  // Only some ranks failed; the others may be blocked in a collective: report and take the job down.
  std::cerr << "daei: error: [rank " << rank << "] " << msg << std::endl;
  MPI_Abort(MPI_COMM_WORLD, rc);
  return rc;
}

std::string mpi_library_version() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(v, &len);
  std::string s(v, len);
  if (auto nl = s.find_first_of(",\n"); nl != std::string::npos) s = s.substr(0, nl);
  return s;
}

}  // namespace daei
