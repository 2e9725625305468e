// Collectives behind one small interface (marian's ICommunicator idea): a single-process implementation so most
// logic is tested without mpirun, an MPI one for CPU tensors and an NCCL one for CUDA tensors.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <torch/types.h>

namespace daei {

enum class ReduceOp { Sum, Avg, Max };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;
  virtual std::string kind() const = 0;

  // In place, on every rank; Avg divides the sum by size() (floating tensors only).
  virtual void allreduce(at::Tensor& t, ReduceOp op) = 0;
  virtual void broadcast(at::Tensor& t, int root) = 0;
  virtual std::vector<std::string> allgather(const std::string& s) = 0;
  virtual void barrier() = 0;
  // Fatal error on this rank: tear the job down rather than let other ranks hang in a collective.
  virtual void abort(int code) = 0;

  // Helpers built on the primitives.
  double allreduce(double v, ReduceOp op);
  int64_t allreduce(int64_t v, ReduceOp op);
  std::string broadcast(const std::string& s, int root);
  bool is_root() const { return rank() == 0; }
  // Runs fn on rank 0 only; an exception there is re-thrown on every rank (as Error with the same message), so
  // all ranks fail together instead of waiting in the next collective. Ends with a barrier.
  void run_on_root(const std::function<void()>& fn);
};

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  std::string kind() const override { return "local"; }
  using Communicator::allreduce;
  using Communicator::broadcast;
  void allreduce(at::Tensor&, ReduceOp) override {}
  void broadcast(at::Tensor&, int) override {}
  std::vector<std::string> allgather(const std::string& s) override { return {s}; }
  void barrier() override {}
  void abort(int code) override;
};

// MPI must be initialised (MpiProcess) before this is constructed.
std::unique_ptr<Communicator> make_mpi_communicator();
// Available when daei was built with NCCL and a CUDA libtorch; throws otherwise.
std::unique_ptr<Communicator> make_nccl_communicator(int device);
bool nccl_communicator_available();

}  // namespace daei
