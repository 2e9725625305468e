#include "dist/nccl_raw.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include "core/error.h"

#define CUDA_CHECK(call)                                                                                    \
  do {                                                                                                      \
    cudaError_t e_ = (call);                                                                                \
    if (e_ != cudaSuccess) ::daei::fail_at(__FILE__, __LINE__, fmt::format("{}: {}", #call, cudaGetErrorString(e_))); \
  } while (0)
#define NCCL_CHECK(call)                                                                                    \
  do {                                                                                                      \
    ncclResult_t r_ = (call);                                                                               \
    if (r_ != ncclSuccess) ::daei::fail_at(__FILE__, __LINE__, fmt::format("{}: {}", #call, ncclGetErrorString(r_))); \
  } while (0)

namespace daei::nccl_raw {

static_assert(sizeof(ncclUniqueId) == sizeof(UniqueId), "NCCL unique id size changed");

struct Comm {
  ncclComm_t comm;
};

namespace {
ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::F16: return ncclFloat16;
#if NCCL_VERSION_CODE >= 21000
    case DType::BF16: return ncclBfloat16;
#endif
    case DType::I64: return ncclInt64;
    case DType::I32: return ncclInt32;
    case DType::U8: return ncclUint8;
    default: DAEI_FAIL("[dist] NCCL: dtype not supported by this NCCL version");
  }
}
ncclRedOp_t nccl_op(Op op) {
  switch (op) {
    case Op::Sum: return ncclSum;
    case Op::Max: return ncclMax;
    case Op::Avg: return ncclAvg;  // NCCL >= 2.10
  }
  return ncclSum;
}
}  // namespace

int version_code() {
  int v = 0;
  NCCL_CHECK(ncclGetVersion(&v));
  return v;
}
int header_version_code() { return NCCL_VERSION_CODE; }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

UniqueId make_unique_id() {
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));
  UniqueId out;
  std::memcpy(out.data(), &id, sizeof id);
  return out;
}

Comm* init(const UniqueId& uid, int world, int rank, int device) {
  CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id;
  std::memcpy(&id, uid.data(), sizeof id);
  auto* c = new Comm{};
  NCCL_CHECK(ncclCommInitRank(&c->comm, world, id, rank));
  return c;
}

void allreduce(Comm* c, void* buf, size_t count, DType dt, Op op, void* stream) {
  NCCL_CHECK(ncclAllReduce(buf, buf, count, nccl_type(dt), nccl_op(op), c->comm, static_cast<cudaStream_t>(stream)));
}

void broadcast(Comm* c, void* buf, size_t count, DType dt, int root, void* stream) {
  NCCL_CHECK(ncclBroadcast(buf, buf, count, nccl_type(dt), root, c->comm, static_cast<cudaStream_t>(stream)));
}

void sync(void* stream) { CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream))); }

void abort(Comm* c) {
  if (c) ncclCommAbort(c->comm);
  delete c;
}

void destroy(Comm* c) {
  if (c) ncclCommDestroy(c->comm);
  delete c;
}

}  // namespace daei::nccl_raw
