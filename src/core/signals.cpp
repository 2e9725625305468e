#include "core/signals.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

namespace daei::signals {
namespace {
volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int) { g_stop = 1; }

std::string process_name(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}
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

bool is_launcher_name(const std::string& name) {
  for (const char* l : {"mpirun", "mpiexec", "orterun", "orted", "prterun", "prted", "hydra_pmi_proxy"})
    if (name == l) return true;
  return false;
}

bool exit_when_launcher_dies(int poll_ms) {
  static std::atomic<bool> started{false};
  const pid_t parent = ::getppid();
  if (!is_launcher_name(process_name(parent))) return false;
  if (started.exchange(true)) return true;
  std::thread([parent, poll_ms] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
      if (::getppid() != parent) {
        // Reparented: the launcher is gone (kill -9 of mpirun). The other ranks are going too; a collective would
        // wait forever. The newest complete checkpoint is what a rerun resumes from.
        char msg[160];
        int n = std::snprintf(msg, sizeof msg,
                              "daei: error: the MPI launcher (pid %d) is gone; rank process %d exits\n",
                              int(parent), int(::getpid()));
        if (n > 0) (void)!::write(2, msg, size_t(n));
        ::_exit(1);
      }
    }
  }).detach();
  return true;
}

}  // namespace daei::signals
