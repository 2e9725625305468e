#include "dist/communicator.h"

#include <cstdlib>
#include <torch/torch.h>

#include "core/error.h"

namespace daei {

double Communicator::allreduce(double v, ReduceOp op) {
  auto t = torch::tensor({v}, torch::kFloat64);
  allreduce(t, op);
  return t.item<double>();
}

int64_t Communicator::allreduce(int64_t v, ReduceOp op) {
  DAEI_ASSERT(op != ReduceOp::Avg, "integer allreduce cannot average");
  auto t = torch::tensor({v}, torch::kInt64);
  allreduce(t, op);
  return t.item<int64_t>();
}

std::string Communicator::broadcast(const std::string& s, int root) {
  auto len = torch::tensor({static_cast<int64_t>(s.size())}, torch::kInt64);
  broadcast(len, root);
  auto buf = torch::zeros({len.item<int64_t>()}, torch::kUInt8);
  if (rank() == root && !s.empty()) std::memcpy(buf.data_ptr(), s.data(), s.size());
  if (buf.numel() > 0) broadcast(buf, root);
  return std::string(static_cast<const char*>(buf.data_ptr()), buf.numel());
}

void Communicator::run_on_root(const std::function<void()>& fn) {
  std::string err;
  if (is_root()) {
    try {
      fn();
    } catch (const std::exception& e) {
      err = e.what();
      if (err.empty()) err = "error";
    }
  }
  if (size() > 1) err = broadcast(err, 0);
  if (!err.empty()) throw Error(err);
  barrier();
}

void LocalCommunicator::abort(int code) { std::_Exit(code); }

#ifndef DAEI_NCCL_COMMUNICATOR
bool nccl_communicator_available() { return false; }
std::unique_ptr<Communicator> make_nccl_communicator(int) {
  DAEI_FAIL("the NCCL communicator needs a CUDA build of libtorch and nccl.h at configure time; "
            "this build has {} — use dist.backend=mpi",
#ifdef DAEI_HAVE_NCCL
            "nccl.h but a CPU-only libtorch"
#else
            "neither"
#endif
  );
}
#endif

}  // namespace daei
