#include "core/signals.h"

#include <csignal>

namespace daei::signals {
namespace {
volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int) { g_stop = 1; }
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}
bool stop_requested() { return g_stop != 0; }
void request_stop() { g_stop = 1; }
void clear() { g_stop = 0; }

}  // namespace daei::signals
