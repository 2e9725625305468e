// SIGUSR1 / SIGTERM request "checkpoint at the next step boundary, then exit 75". The handler only sets a flag
// (SEI CERT SIG30-C); the trainer folds the flag into the all-reduced control word, so every rank stops together.
#pragma once

namespace daei::signals {

void install_stop_handlers();
bool stop_requested();
void request_stop();   // for tests and for a stop file
void clear();

}  // namespace daei::signals
