// SIGUSR1 / SIGTERM request "checkpoint at the next step boundary, then exit 75". The handler only sets a flag
// (SEI CERT SIG30-C); the trainer folds the flag into the all-reduced control word, so every rank stops together.
#pragma once
#include <string>

namespace daei::signals {

void install_stop_handlers();
bool stop_requested();
void request_stop();   // for tests and for a stop file
void clear();

// When this process was started by an MPI launcher (its parent is mpirun / orted / prted / …), a background thread
// checks every poll_ms whether the parent is still the same process; when the launcher was killed (kill -9) the
// rank prints one line and exits (_exit(1)) instead of lingering in a collective. Returns whether it watches.
bool exit_when_launcher_dies(int poll_ms = 100);
bool is_launcher_name(const std::string& process_name);

}  // namespace daei::signals
