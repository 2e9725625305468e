// How a command's ranks start, talk and fail (issue 48: the only raw MPI of the command line, moved here from
// main): MPI's start for a multi-rank command, the communicator dist.backend asks for, and the failure report that
// tells a failure of every rank (reported once) from a failure of some (each reports, the job is aborted).
#pragma once
#include <memory>
#include <string>

#include "dist/mpi_process.h"

namespace daei {

class Communicator;
class Config;

// MPI_Init_thread for a command that runs on ranks. Started without a launcher (a singleton), MPI stays off the
// network (a user's own OMPI_MCA_* setting wins); with several ranks, a private communicator for report_failure;
// a rank whose launcher (mpirun / orted) dies exits at once instead of lingering.
const ProcessInfo& start_ranks(int* argc, char*** argv);

// The communicator the config asks for (dist.backend: auto | local | mpi | nccl).
std::unique_ptr<Communicator> make_communicator(const Config& cfg, const ProcessInfo& proc);

// Prints "daei: error: MSG" once and returns rc when every rank failed (or there is one); when only some ranks
// failed (the others may wait in a collective), each reports with its rank and the job is aborted with rc.
int report_failure(const std::string& msg, int rc);

// "Open MPI v4.1.4": the MPI library's version line, for the start-up log.
std::string mpi_library_version();

}  // namespace daei
