// MPI_CHECK(call): an MPI error becomes a daei::Error naming the call site (MPI_ERRORS_RETURN is set on world).
#pragma once
#include <mpi.h>

#include "core/error.h"

#define MPI_CHECK(call)                                                             \
  do {                                                                              \
    int mpi_rc_ = (call);                                                           \
    if (mpi_rc_ != MPI_SUCCESS) {                                                   \
      char mpi_msg_[MPI_MAX_ERROR_STRING];                                          \
      int mpi_len_ = 0;                                                             \
      MPI_Error_string(mpi_rc_, mpi_msg_, &mpi_len_);                               \
      ::daei::fail_at(__FILE__, __LINE__, fmt::format("{} failed: {}", #call,       \
                                                      std::string(mpi_msg_, mpi_len_))); \
    }                                                                               \
  } while (0)
