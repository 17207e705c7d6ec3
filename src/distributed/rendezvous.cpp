// The rendezvous of a data-parallel run (distributed/rendezvous.h): the TCP store, the ranks' agreement
// on one config, and the report of a rank that stopped before it. Compiled only with a c10d backend;
// it sees POSLAB_WITH_GLOO / POSLAB_WITH_NCCL as process_group.cpp does.
#include <torch/version.h>

#include "poslab_c10d.h"  // POSLAB_WITH_GLOO, POSLAB_WITH_NCCL, from the build's configuration (CMakeLists.txt)

#if defined(POSLAB_WITH_GLOO) || defined(POSLAB_WITH_NCCL)
#include "distributed/rendezvous.h"

#include <spdlog/spdlog.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "distributed/distributed.h"

namespace poslab {
// The TCP store with options `o`, under torchrun's per-attempt prefix where its agent hosts it.
static c10::intrusive_ptr<c10d::Store> make_tcp_store(const Launch& l, const c10d::TCPStoreOptions& o) {
  c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::TCPStore>(l.master_addr, o);
  if (l.agent_store) store = c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + l.restart_count, store);
  return store;
}

// The rendezvous store. Under torchrun's default rendezvous its agent already serves MASTER_PORT,
// and every rank is a client under the agent's per-attempt prefix (as torch.distributed does).
c10::intrusive_ptr<c10d::Store> make_store(const Launch& l, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(l.master_port);
  o.isServer = !l.agent_store && l.rank == 0;
  if (!l.agent_store) o.numWorkers = static_cast<size_t>(l.world_size);
  o.waitWorkers = false;  // the process group's own rendezvous waits for every rank, bounded alike
  o.timeout = timeout;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  // 2.4+ ask for the libuv store by default, which Debian 13's LibTorch 2.6 is built without ("use_libuv
  // was requested but PyTorch was build without libuv support"): fall back to the classic store there.
  try {
    return make_tcp_store(l, o);
  } catch (const c10::Error& e) {
    if (std::string(e.what()).find("libuv") == std::string::npos) throw;
    o.useLibUV = false;
  }
#endif
  return make_tcp_store(l, o);
}

static std::vector<uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }
static std::string text(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

// A rank that stops before the rendezvous leaves its error here; every rank but 0 counts itself in
// kFailedRead once it has read it.
const std::string kFailed = "poslab/failed", kFailedRead = "poslab/failed/read";

// Rank 0 may serve the store: it stays until every other rank has read what it must (`counter` at
// world_size - 1) or `deadline` has passed.
static void wait_for_readers(c10d::Store& store, const Launch& l, const std::string& counter,
                             std::chrono::steady_clock::time_point deadline) {
  while (store.add(counter, 0) < l.world_size - 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

// `key`'s value once a rank has set it. Where a rank reports instead that it stopped before the rendezvous,
// its error stops this rank too (rank 0 first waits until the others have read it).
static std::vector<uint8_t> get_unless_failed(c10d::Store& store, const Launch& l, const std::string& key,
                                              std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now(), deadline = start + timeout;
  bool said = false;  // a rank not started yet leaves the others waiting: said after a few seconds, not a silent hang
  for (;;) {
    if (!said && std::chrono::steady_clock::now() - start > std::chrono::seconds(5)) {
      said = true;
      spdlog::warn("distributed (rank {} of {}): waiting for the other ranks at the rendezvous ({}:{}), up to {} s in all "
                   "(POSLAB_DIST_TIMEOUT_S)", l.rank, l.world_size, l.master_addr, l.master_port,
                   std::chrono::duration_cast<std::chrono::seconds>(timeout).count());
    }
    if (store.check({kFailed})) {
      const std::string error = text(store.get(kFailed));
      if (l.rank != 0) store.add(kFailedRead, 1);
      else wait_for_readers(store, l, kFailedRead, deadline);
      throw DistributedError("distributed (rank " + std::to_string(l.rank) + " of " + std::to_string(l.world_size) +
                             "): " + error + "; every rank stops");
    }
    if (store.check({key})) return store.get(key);
    if (std::chrono::steady_clock::now() >= deadline)
      throw std::runtime_error("no rank set " + key + " in time");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}


// Every rank must train on rank 0's config: ranks launched with another one used to run on silently,
// deadlock in a collective or abort in Gloo. Through the store, before any process group exists: rank
// 0 publishes its config, every other rank compares its own and answers with the first difference (or
// none), and rank 0 publishes the verdict, which every rank reads: all stop together, naming the key.
// Returns the verdict: {} when every rank agrees, else {rank, key, value, rank0, others} (the lowest
// differing rank, its value and rank 0's at that key, how many more ranks differ).
nlohmann::json agree_on_config(c10d::Store& store, const Launch& l, const nlohmann::json& same_everywhere,
                               std::chrono::milliseconds timeout) {
  using nlohmann::json;
  const std::string prefix = "poslab/config";
  const json mine = json::parse(same_everywhere.dump());  // as the other ranks read it: numbers alike
  if (l.rank != 0) {
    const json theirs = json::parse(text(get_unless_failed(store, l, prefix, timeout)));
    json answer = json::object();
    if (const auto d = first_difference(mine, theirs)) answer = {{"key", d->key}, {"value", d->here}, {"rank0", d->there}};
    store.set(prefix + "/rank/" + std::to_string(l.rank), bytes(answer.dump()));
    json verdict = json::parse(text(get_unless_failed(store, l, prefix + "/verdict", timeout)));
    store.add(prefix + "/read", 1);  // a round trip: rank 0 may stop (and take the store with it) now
    return verdict;
  }
  store.set(prefix, bytes(mine.dump()));
  json verdict = json::object();
  int differing = 0;
  for (int r = 1; r < l.world_size; ++r) {
    const json answer = json::parse(text(get_unless_failed(store, l, prefix + "/rank/" + std::to_string(r), timeout)));
    if (answer.empty()) continue;
    if (differing++ == 0) verdict = {{"rank", r}, {"key", answer["key"]}, {"value", answer["value"]}, {"rank0", answer["rank0"]}};
  }
  if (differing > 0) verdict["others"] = differing - 1;
  store.set(prefix + "/verdict", bytes(verdict.dump()));
  if (verdict.empty()) return verdict;
  // Rank 0 serves the store (outside torchrun): it stays until every rank has read the verdict.
  wait_for_readers(store, l, prefix + "/read", std::chrono::steady_clock::now() + timeout);
  return verdict;
}

// The verdict as this rank's one-line refusal.
std::string mismatch_message(const nlohmann::json& verdict, int me) {
  const int r = verdict["rank"].get<int>();
  const std::string rank = "rank " + std::to_string(r), value = verdict["value"], rank0 = verdict["rank0"];
  const int others = verdict.value("others", 0);
  return rank + "'s config differs from rank 0's at " + verdict["key"].get<std::string>() + ": " + value +
         (me == r ? " here, " : " on " + rank + ", ") + rank0 + (me == 0 ? " here" : " on rank 0") +
         (others > 0 ? " (and " + std::to_string(others) + " more rank(s) differ)" : "") +
         "; every rank stops: " +
         (verdict["key"] == "resolved.start"
              ? std::string("every rank must find the same run directory (on a filesystem every rank reads)")
          : verdict["key"] == "resolved.stop_at"
              ? std::string("give every rank the same --stop-at")
          : verdict["key"] == "resolved.precision"
              ? std::string("train.precision auto chose by each machine's CPU (on a CPU, by timing its products); set "
                            "train.precision to fp32 or bf16 for every rank")
              : std::string("launch them all with the same config (only file paths and train.threads may differ)"));
}


void post_failure(c10d::Store& store, const Launch& l, const std::string& error, std::chrono::milliseconds timeout) {
  const std::string message = "rank " + std::to_string(l.rank) + " stopped before the rendezvous: " + error;
  store.set(kFailed, bytes(message));
  if (l.rank != 0) {
    store.add(kFailedRead, 1);
    return;
  }
  // Rank 0 serves the store, so it stays until the others have read why. Where they have not within a
  // second (not started yet, or none at all: launch variables left set by accident), it says so now
  // rather than only after the wait.
  const auto start = std::chrono::steady_clock::now(), deadline = start + timeout;
  wait_for_readers(store, l, kFailedRead, std::min(deadline, start + std::chrono::seconds(1)));
  if (store.add(kFailedRead, 0) >= l.world_size - 1 || std::chrono::steady_clock::now() >= deadline) return;
  std::cerr << "poslab: distributed launch (" << l.launcher << ", world size " << l.world_size << "): " << message
            << "; waiting up to " << std::chrono::duration_cast<std::chrono::seconds>(timeout).count()
            << " s for the other ranks to read it (Ctrl-C stops now)" << std::endl;
  wait_for_readers(store, l, kFailedRead, deadline);
}

}  // namespace poslab
#endif
