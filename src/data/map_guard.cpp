// The SIGBUS handler behind guarded token-file maps: a fault inside one is answered with zero pages
// and a flag; any other SIGBUS goes where it went before (the previous handler, or the default: a crash).
#include "data/map_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace poslab {
namespace {

constexpr int kSlots = 64;  // open token files at once; a run has two
struct Slot {
  std::atomic<uintptr_t> begin{0};  // 0: free
  std::atomic<size_t> bytes{0};
  std::atomic<bool> lost{false};
};
Slot g_slots[kSlots];
struct sigaction g_previous {};
uintptr_t g_page = 4096;

// Only async-signal-safe work: atomics, mmap, sigaction.
void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto at = reinterpret_cast<uintptr_t>(info->si_addr);
  for (auto& slot : g_slots) {
    const uintptr_t begin = slot.begin.load();
    const size_t bytes = slot.bytes.load();
    if (begin == 0 || at < begin || at >= begin + bytes) continue;
    const uintptr_t page = at & ~(g_page - 1);
    void* zeros = ::mmap(reinterpret_cast<void*>(page), begin + bytes - page, PROT_READ,
                         MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (zeros == MAP_FAILED) break;
    slot.lost.store(true);
    return;  // the read runs again, on zeros
  }
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  } else {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGBUS, &dfl, nullptr);  // the faulting access runs again and ends the process, as without us
  }
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous);
  });
}

}  // namespace

int guard_mapping(const void* begin, size_t bytes) {
  install_once();
  static std::mutex mutex;  // slots are claimed under a lock; the handler only reads them
  std::lock_guard<std::mutex> lock(mutex);
  for (int i = 0; i < kSlots; ++i) {
    if (g_slots[i].begin.load() != 0) continue;
    g_slots[i].lost.store(false);
    g_slots[i].bytes.store(bytes);
    g_slots[i].begin.store(reinterpret_cast<uintptr_t>(begin));
    return i;
  }
  return -1;
}

void unguard_mapping(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  g_slots[slot].begin.store(0);
}

bool mapping_lost(int slot) { return slot >= 0 && slot < kSlots && g_slots[slot].lost.load(); }

}  // namespace poslab
