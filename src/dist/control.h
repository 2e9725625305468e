// The per-step control word: every decision that changes control flow is all-reduced first, so no rank waits in a
// collective that another rank skipped. Flags are OR-ed across ranks.
#pragma once

namespace daei {

class Communicator;

struct ControlWord {
  bool stop = false;        // a stop was requested (signal, stop file) on some rank
  bool save = false;        // save a checkpoint at this step boundary
  bool nonfinite = false;   // the reduced gradient is not finite: skip the update
  bool end_of_data = false;
};

ControlWord agree(Communicator& comm, const ControlWord& local);

}  // namespace daei
