// Async-signal-safe stop flag: the handler only touches a lock-free atomic and write(2).
#include "util/signals.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace poslab {

static std::atomic<int> g_signals{0};
static std::atomic<int64_t> g_first_ns{0};  // when the first signal came (CLOCK_MONOTONIC)
static std::atomic<bool> g_exit_now{false};  // exit_on_stop: nothing left to checkpoint
static char g_exit_message[1024];
static size_t g_exit_message_size = 0;

static int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

static void on_signal(int) {
  if (g_exit_now.load()) {
    (void)!::write(2, g_exit_message, g_exit_message_size);
    ::_exit(130);
  }
  const int64_t now = now_ns();
  if (g_signals.load() >= 1) {
    // One stop can arrive twice: Ctrl-C reaches a compare cell from the terminal and again from compare, which
    // passes a stop on to its cells (a stop sent to compare's process alone must reach them too).
    if (now - g_first_ns.load() < 1000000000) return;
    const char msg[] = "\nposlab: second signal, exiting now\n";
    (void)!::write(2, msg, sizeof(msg) - 1);
    ::_exit(130);
  }
  g_first_ns.store(now);
  g_signals.store(1);
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

void exit_on_stop(const std::string& message) {
  const std::string line = "\nposlab: " + message + "\n";
  g_exit_message_size = std::min(line.size(), sizeof(g_exit_message));
  std::memcpy(g_exit_message, line.data(), g_exit_message_size);
  g_exit_now.store(true);
}

void stop_at_steps() { g_exit_now.store(false); }

bool stop_requested() { return g_signals.load() > 0; }
void request_stop() { g_signals.store(1); }
void clear_stop() { g_signals.store(0); }

void stop_with_parent() {
  const char* v = std::getenv(kParentVariable);
  if (v == nullptr) return;
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  // Gone between the spawn and here: the signal above will never come.
  if (std::to_string(::getppid()) != v) ::raise(SIGTERM);
}

}  // namespace poslab
