// What follows a finished cell inside compare's own process: its retrieval probes, then the attention
// statistics for the report, on one worker thread beside the cells still training.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "experiment/experiment.h"

namespace poslab {

// The worker fills the cores' slack (start-ups, the last cell alone) instead of a phase of its own after
// the cells: on 2 cores the main job's 21 probes took 16 s after the cells (docs/benchmarks.md). Always on
// one intra-op thread: while cells train the cores are theirs, and a fixed count keeps the scores
// independent of which cells happened to be running (a probe's log-probabilities differ in the 8th digit
// between 1 and 2 threads). One worker rather than several: the thread count and the fused-ops switch are
// process-wide. A failure is reported and costs only that cell's probe columns or attention picture; the
// loss results stand.
class FollowUps {
 public:
  FollowUps(const Experiment& e, const CompareOptions& o);
  ~FollowUps() { finish(); }
  FollowUps(const FollowUps&) = delete;
  FollowUps& operator=(const FollowUps&) = delete;

  // A cell that finished: its probes and statistics are queued.
  void add(const Cell& c);
  // A cell that failed: its probes leave the count.
  void failed(const Cell& c);
  // No more cells: returns when what is queued is done (or a stop was asked for).
  void finish();
  // The probes that failed: [{"cell", "task", "error"}] (read after finish()).
  nlohmann::json probe_errors();

 private:
  std::vector<std::string> pending_probes(const Cell& c) const;
  void work();
  void follow(const Cell& c);
  int planned();

  nlohmann::json probe_errors_ = nlohmann::json::array();
  const Experiment& e_;
  const CompareOptions& o_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<const Cell*> queue_;
  bool closed_ = false;
  int planned_ = 0;
  int done_ = 0;  // probes started, counted by the worker alone
  std::thread worker_;
};

}  // namespace poslab
