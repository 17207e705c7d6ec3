// The follow-ups of finished cells (follow_ups.h): each cell's pending probes, run in this process on one
// thread, then its attention statistics; failures recorded, never thrown out of the worker.
#include "experiment/follow_ups.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "eval/attention_stats.h"
#include "experiment/runner_parts.h"
#include "probe/probe.h"
#include "util/progress.h"
#include "util/signals.h"

namespace poslab {
using nlohmann::json;
using runner_parts::cell_dir;

FollowUps::FollowUps(const Experiment& e, const CompareOptions& o) : e_(e), o_(o) {
  for (const auto& c : e.cells)
    if (c.error.empty()) planned_ += static_cast<int>(pending_probes(c).size());
  worker_ = std::thread([this] { work(); });
}

void FollowUps::add(const Cell& c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(&c);
  }
  wake_.notify_one();
}

void FollowUps::failed(const Cell& c) {
  std::lock_guard<std::mutex> lock(mu_);
  planned_ -= static_cast<int>(pending_probes(c).size());
}

void FollowUps::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  wake_.notify_one();
  if (worker_.joinable()) worker_.join();
}

json FollowUps::probe_errors() {
  std::lock_guard<std::mutex> lock(mu_);
  return probe_errors_;
}

std::vector<std::string> FollowUps::pending_probes(const Cell& c) const {
  std::vector<std::string> tasks;
  for (auto it = e_.probes.begin(); it != e_.probes.end(); ++it)
    if (!file_exists(cell_dir(o_.out, c) + "/probe-" + it.key() + ".json")) tasks.push_back(it.key());
  return tasks;
}

void FollowUps::work() {
  for (;;) {
    const Cell* c = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return !queue_.empty() || closed_; });
      if (queue_.empty()) return;
      c = queue_.front();
      queue_.pop_front();
    }
    if (stop_requested()) continue;  // drain without work: the next run of the command does it
    try {
      follow(*c);
    } catch (const std::exception& ex) {  // a thread must not let one escape
      spdlog::warn("{}: probes and attention statistics skipped: {}", c->name, ex.what());
    }
  }
}

void FollowUps::follow(const Cell& c) {
  const std::string dir = cell_dir(o_.out, c);
  for (const auto& task : pending_probes(c)) {
    if (stop_requested()) return;
    const auto t0 = std::chrono::steady_clock::now();
    const int k = ++done_;
    try {
      ProbeOptions po = probe_options_from_json(task, e_.probes[task], "probes." + task);
      po.quiet = true;
      po.threads = 1;
      const json p = probe_run(dir, po);
      spdlog::info("[probe {}/{}] {} {}: effective length {} ({})", k, planned(), c.name, task, p["effective_length"].dump(),
                   format_duration(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
    } catch (const std::exception& ex) {
      spdlog::error("[probe {}/{}] {} {} failed: {}", k, planned(), c.name, task, ex.what());
      std::lock_guard<std::mutex> lock(mu_);
      probe_errors_.push_back({{"cell", c.name}, {"task", task}, {"error", ex.what()}});
    }
  }
  if (stop_requested() || file_exists(dir + "/attention.json")) return;
  try {
    AttentionOptions ao;
    ao.sequences = 2;
    ao.map_size = 48;
    ao.quiet = true;  // one line per length would bury the cells' progress
    // One thread, as the probes: with spinning OpenMP workers (compare's default) a team of two would
    // keep a core busy beside the cells still training long after its work.
    ao.threads = 1;
    attention_run(dir, ao);
  } catch (const std::exception& ex) {
    spdlog::warn("{}: attention statistics skipped: {}", c.name, ex.what());
  }
}

int FollowUps::planned() {
  std::lock_guard<std::mutex> lock(mu_);
  return planned_;
}

}  // namespace poslab
