// The raw NCCL layer: device pointers and a cudaStream_t passed as void*, no libtorch. It compiles wherever nccl.h
// and the CUDA runtime headers exist (CI has them in /usr/local/cuda), so CI proves it builds even without a GPU.
#pragma once
#include <array>
#include <cstddef>
#include <string>

namespace daei::nccl_raw {

enum class DType { F32, F64, F16, BF16, I64, I32, U8 };
enum class Op { Sum, Avg, Max };

struct Comm;  // opaque: ncclComm_t + its stream

using UniqueId = std::array<char, 128>;

int version_code();           // ncclGetVersion (the library actually loaded)
int header_version_code();    // NCCL_VERSION_CODE of the nccl.h compiled against
int cuda_device_count();      // 0 when there is no driver
UniqueId make_unique_id();    // rank 0 only, then broadcast over MPI
Comm* init(const UniqueId& id, int world, int rank, int device);
void allreduce(Comm* c, void* buf, size_t count, DType dt, Op op, void* stream);
void broadcast(Comm* c, void* buf, size_t count, DType dt, int root, void* stream);
void sync(void* stream);
// Non-blocking teardown for fatal errors (ncclCommDestroy could block forever on a dead peer).
void abort(Comm* c);
void destroy(Comm* c);

}  // namespace daei::nccl_raw
