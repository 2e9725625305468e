#include "dist/control.h"

#include <torch/torch.h>

#include "dist/communicator.h"

namespace daei {

ControlWord agree(Communicator& comm, const ControlWord& local) {
  auto t = torch::tensor({int32_t(local.stop), int32_t(local.save), int32_t(local.nonfinite),
                          int32_t(local.end_of_data)},
                         torch::kInt32);
  comm.allreduce(t, ReduceOp::Max);
  auto a = t.accessor<int32_t, 1>();
  return ControlWord{a[0] != 0, a[1] != 0, a[2] != 0, a[3] != 0};
}

}  // namespace daei
