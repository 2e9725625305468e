// MPI collectives on CPU tensors. Half and bfloat16 have no MPI type: they are reduced in float32 and converted
// back, which is also what keeps their sums from losing precision.
#include <mpi.h>

#include <torch/torch.h>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/mpi_check.h"
#include "dist/mpi_process.h"

namespace daei {
namespace {

MPI_Datatype mpi_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kLong: return MPI_INT64_T;
    case at::kInt: return MPI_INT32_T;
    case at::kShort: return MPI_INT16_T;
    case at::kChar: return MPI_INT8_T;
    case at::kByte: return MPI_UINT8_T;
    case at::kBool: return MPI_C_BOOL;
    default: DAEI_FAIL("[dist] MPI communicator: unsupported dtype {}", c10::toString(t));
  }
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() : info_(MpiProcess::info()) {
    DAEI_ASSERT(MpiProcess::initialized(), "MpiProcess::init must run before the MPI communicator is made");
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  }
  int rank() const override { return info_.rank; }
  int size() const override { return info_.world; }
  int local_rank() const override { return info_.local_rank; }
  std::string kind() const override { return "mpi"; }
  using Communicator::allreduce;
  using Communicator::broadcast;

  void allreduce(at::Tensor& t, ReduceOp op) override {
    DAEI_ASSERT(t.device().is_cpu(), "[dist] MPI communicator takes CPU tensors, got {}", t.device().str());
    if (op == ReduceOp::Avg)
      DAEI_ASSERT(at::isFloatingType(t.scalar_type()), "[dist] Avg needs a floating tensor");
    const bool low_precision = t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
    at::Tensor work = low_precision ? t.to(at::kFloat) : t.contiguous();
    MPI_Op mop = op == ReduceOp::Max ? MPI_MAX : MPI_SUM;
    if (t.scalar_type() == at::kBool) mop = MPI_LOR;  // "any rank set it"
    if (work.numel() > 0)
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, work.data_ptr(), static_cast<int>(work.numel()),
                              mpi_type(work.scalar_type()), mop, MPI_COMM_WORLD));
    if (op == ReduceOp::Avg) work.div_(size());
    if (!work.is_same(t)) t.copy_(work);
  }

  void broadcast(at::Tensor& t, int root) override {
    DAEI_ASSERT(t.device().is_cpu(), "[dist] MPI communicator takes CPU tensors");
    // Raw bytes: exact for every dtype.
    at::Tensor work = t.contiguous();
    int64_t bytes = work.numel() * static_cast<int64_t>(work.element_size());
    if (bytes > 0) MPI_CHECK(MPI_Bcast(work.data_ptr(), static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD));
    if (!work.is_same(t)) t.copy_(work);
  }

  std::vector<std::string> allgather(const std::string& s) override {
    int len = static_cast<int>(s.size());
    std::vector<int> lens(size()), offs(size());
    MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD));
    int total = 0;
    for (int i = 0; i < size(); ++i) offs[i] = total, total += lens[i];
    std::string all(total, '\0');
    MPI_CHECK(MPI_Allgatherv(s.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR,
                             MPI_COMM_WORLD));
    std::vector<std::string> out;
    for (int i = 0; i < size(); ++i) out.push_back(all.substr(offs[i], lens[i]));
    return out;
  }

  void barrier() override { MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); }
  void abort(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }

 private:
  ProcessInfo info_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiCommunicator>(); }

}  // namespace daei
