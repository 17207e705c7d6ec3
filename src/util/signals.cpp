// Async-signal-safe stop flag: the handler only touches a lock-free atomic and write(2).
#include "util/signals.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace poslab {

static std::atomic<int> g_signals{0};

static void on_signal(int) {
  if (g_signals.fetch_add(1) >= 1) {
    const char msg[] = "\nposlab: second signal, exiting now\n";
    (void)!::write(2, msg, sizeof(msg) - 1);
    ::_exit(130);
  }
  const char msg[] = "\nposlab: stopping after this step and writing a checkpoint (signal again to exit now)\n";
  (void)!::write(2, msg, sizeof(msg) - 1);
}

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() { return g_signals.load() > 0; }
void request_stop() { g_signals.store(1); }
void clear_stop() { g_signals.store(0); }

}  // namespace poslab
