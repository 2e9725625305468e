// Glue between libtorch's CUDA tensors and the raw NCCL layer. Compiled only with a CUDA build of libtorch.
// Tensors go through NCCL on the current torch stream (so no extra host sync is needed before or after);
// strings and barriers go through MPI, which also carries the NCCL unique id from rank 0.
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

#include "core/error.h"
#include "core/log.h"
#include "dist/communicator.h"
#include "dist/mpi_process.h"
#include "dist/nccl_raw.h"

namespace daei {
namespace {

nccl_raw::DType dtype_of(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return nccl_raw::DType::F32;
    case at::kDouble: return nccl_raw::DType::F64;
    case at::kHalf: return nccl_raw::DType::F16;
    case at::kBFloat16: return nccl_raw::DType::BF16;
    case at::kLong: return nccl_raw::DType::I64;
    case at::kInt: return nccl_raw::DType::I32;
    case at::kByte:
    case at::kBool: return nccl_raw::DType::U8;
    default: DAEI_FAIL("[dist] NCCL communicator: unsupported dtype {}", c10::toString(t));
  }
}

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(int local_rank)
      : mpi_(checked_mpi()), device_(local_rank % std::max(1, nccl_raw::cuda_device_count())) {
    auto id_tensor = torch::zeros({128}, torch::kUInt8);
    if (mpi_->rank() == 0) {
      auto id = nccl_raw::make_unique_id();
      std::memcpy(id_tensor.data_ptr(), id.data(), id.size());
    }
    mpi_->broadcast(id_tensor, 0);
    nccl_raw::UniqueId id;
    std::memcpy(id.data(), id_tensor.data_ptr(), id.size());
    comm_ = nccl_raw::init(id, mpi_->size(), mpi_->rank(), device_);
    LOG_INFO("[dist] NCCL {} communicator up: {} ranks, this rank on cuda:{}", nccl_raw::version_code(),
             mpi_->size(), device_);
  }
  ~NcclCommunicator() override { nccl_raw::destroy(comm_); }

  // A CUDA build runs on machines without a GPU: asking for NCCL there is one clear error, before MPI or NCCL start.
  static std::unique_ptr<Communicator> checked_mpi() {
    DAEI_CHECK(nccl_raw::cuda_device_count() > 0,
               "[dist] the NCCL communicator needs a CUDA device and this machine has none (dist.backend mpi or auto "
               "runs on the CPU)");
    return make_mpi_communicator();
  }

  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }
  int local_rank() const override { return mpi_->local_rank(); }
  std::string kind() const override { return "nccl"; }
  using Communicator::allreduce;
  using Communicator::broadcast;

  void allreduce(at::Tensor& t, ReduceOp op) override {
    if (!t.is_cuda()) return mpi_->allreduce(t, op);
    at::Tensor work = t.contiguous();
    auto stream = c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
    auto nop = op == ReduceOp::Sum ? nccl_raw::Op::Sum : op == ReduceOp::Max ? nccl_raw::Op::Max : nccl_raw::Op::Avg;
    nccl_raw::allreduce(comm_, work.data_ptr(), work.numel(), dtype_of(work.scalar_type()), nop, stream);
    if (!work.is_same(t)) t.copy_(work);
  }

  void broadcast(at::Tensor& t, int root) override {
    if (!t.is_cuda()) return mpi_->broadcast(t, root);
    at::Tensor work = t.contiguous();
    auto stream = c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
    nccl_raw::broadcast(comm_, work.data_ptr(), work.numel(), dtype_of(work.scalar_type()), root, stream);
    if (!work.is_same(t)) t.copy_(work);
  }

  std::vector<std::string> allgather(const std::string& s) override { return mpi_->allgather(s); }
  void barrier() override {
    nccl_raw::sync(c10::cuda::getCurrentCUDAStream(device_).stream());
    mpi_->barrier();
  }
  void abort(int code) override {
    nccl_raw::abort(comm_);
    comm_ = nullptr;
    mpi_->abort(code);
  }

 private:
  std::unique_ptr<Communicator> mpi_;
  int device_;
  nccl_raw::Comm* comm_ = nullptr;
};

}  // namespace

bool nccl_communicator_available() { return nccl_raw::cuda_device_count() > 0; }
std::unique_ptr<Communicator> make_nccl_communicator(int device) { return std::make_unique<NcclCommunicator>(device); }

}  // namespace daei
