// Runs an experiment's cells as child `poslab train` processes (a crash fails one cell, not the
// grid), skipping finished cells and resuming interrupted ones, with progress and an ETA; then each
// cell's evaluation variants. What follows a cell is in follow_ups.cpp, the output directory's checks
// in out_dir.cpp, the results and report in finish.cpp.
#include <fcntl.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>
#include <torch/cuda.h>
#include <filesystem>
#include <fstream>
#include <map>

#include "config/config.h"
#include "distributed/launch.h"
#include "experiment/experiment.h"
#include "experiment/follow_ups.h"
#include "experiment/runner_parts.h"
#include "train/memory_estimate.h"
#include "train/run_dir.h"
#include "util/affinity.h"
#include "util/files.h"
#include "util/progress.h"
#include "util/runtime.h"
#include "util/signals.h"

extern char** environ;

namespace poslab {
namespace fs = std::filesystem;
using nlohmann::json;
using runner_parts::cell_dir;
using runner_parts::cell_finished;
using runner_parts::cell_log;
using runner_parts::check_cells_match;
using runner_parts::adopt_eval_settings;
using runner_parts::check_same_experiment;
using runner_parts::drop_foreign_cell_files;
using runner_parts::drop_stale_follow_ups;

// compare's environment less a distributed launcher's variables (launch_variable): each cell is one process
// of its own; set around compare (an sbatch script with several tasks, a MASTER_ADDR exported for other
// work), they would make every cell wait for peers that never come. Plus kParentVariable: a cell stops
// (as on SIGTERM: checkpoint kept) when compare ends without stopping it, killed by SIGKILL or the OOM killer.
static const std::vector<std::string>& cell_environment() {
  static const std::vector<std::string> env = [] {
    std::vector<std::string> kept, dropped;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      const std::string name = entry.substr(0, entry.find('='));
      if (name == kParentVariable) continue;
      (launch_variable(name) ? dropped : kept).push_back(entry);
    }
    kept.push_back(std::string(kParentVariable) + "=" + std::to_string(::getpid()));
    if (!dropped.empty()) {
      std::string names;
      for (const auto& d : dropped) names += (names.empty() ? "" : ", ") + d.substr(0, d.find('='));
      spdlog::info("each cell trains as one process: {} not passed on to the cells", names);
    }
    return kept;
  }();
  return env;
}

// Starts `poslab ARGS...` with stdout and stderr appended to `log`, in cell_environment(), on `cpus` (empty: all
// this process may use; under OpenMP binding its thread is pinned to one, which the child would inherit).
static pid_t spawn_poslab(const CompareOptions& o, std::vector<std::string> args, const std::string& log,
                          const std::vector<int>& cpus = {}) {
  args.insert(args.begin(), o.poslab_binary);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> envp;
  for (const auto& e : cell_environment()) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = 0;
  ThreadAffinity affinity(!cpus.empty() ? cpus : openmp_binds() ? usable_cpus() : std::vector<int>{});
  int rc = posix_spawn(&pid, o.poslab_binary.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + o.poslab_binary + ": " + std::strerror(rc));
  return pid;
}

// Waits for `pid` (any child when -1); a stop that comes meanwhile is passed on to `children` once, so that
// it reaches them when it was sent to compare's process alone (a cell takes the same stop twice as one).
// Polls (every 20 ms) rather than blocks, so that a stop that came just before the wait is not missed.
// `peak_bytes`, if given, gets the child's peak resident memory.
static pid_t wait_passing_stop(pid_t pid, int* status, const std::vector<pid_t>& children, bool* passed,
                               int64_t* peak_bytes = nullptr) {
  for (;;) {
    if (stop_requested() && !*passed) {
      *passed = true;
      for (pid_t child : children) ::kill(child, SIGINT);
    }
    struct rusage usage {};
    const pid_t got = ::wait4(pid, status, WNOHANG, &usage);
    if (got > 0 && peak_bytes != nullptr) *peak_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
    if (got > 0 || (got < 0 && errno != EINTR)) return got;
    if (got == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// A cell stopped by the user: it exited 130 after its checkpoint, or a signal ended it before its handler was in.
static bool stopped(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status) == 130;
  return stop_requested() && WIFSIGNALED(status) && (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM);
}

static pid_t spawn_cell(const CompareOptions& o, const Cell& c, const std::string& config_path,
                        const std::vector<int>& cpus) {
  const std::string dir = cell_dir(o.out, c);
  if (is_run_dir(dir)) return spawn_poslab(o, {"train", "--resume", dir}, cell_log(o.out, c), cpus);
  return spawn_poslab(o, {"train", "--config", config_path, "--out", dir}, cell_log(o.out, c), cpus);
}

// The error a failed cell printed: the last "poslab: ..." line of its log.
static std::string last_error(const std::string& log) {
  std::ifstream in(log);
  std::string line, found;
  while (std::getline(in, line))
    if (line.rfind("poslab: ", 0) == 0) found = line.substr(8);
  if (found.rfind("error: ", 0) == 0) found = found.substr(7);  // "poslab: error: ..." is bad input, named as such
  return found.empty() ? "exited abnormally; see " + log : found;
}

// Each finished cell once per evaluation variant (no retraining), skipping variants done earlier.
static void run_eval_grid(const Experiment& e, const CompareOptions& o, std::map<std::string, std::string>& failures) {
  std::vector<std::pair<const Cell*, const EvalVariant*>> todo;
  for (const auto& c : e.cells)
    for (const auto& v : e.eval_grid)
      if (cell_finished(cell_dir(o.out, c)) && !file_exists(RunPaths{cell_dir(o.out, c)}.eval(v.name))) todo.push_back({&c, &v});
  int done = 0;
  for (const auto& [c, v] : todo) {
    if (stop_requested()) return;
    std::vector<std::string> args = {"eval", "--run", cell_dir(o.out, *c), "--tag", v->name};
    for (const auto& s : v->overrides) args.insert(args.end(), {"--set", s});
    spdlog::info("[eval {}/{}] {} with {}", ++done, todo.size(), c->name, v->name);
    int status = 0;
    const pid_t pid = spawn_poslab(o, args, cell_log(o.out, *c));
    bool passed = false;
    wait_passing_stop(pid, &status, {pid}, &passed);
    if (stop_requested() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) return;  // stopped: done next time
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      failures[c->name + "@" + v->name] = last_error(cell_log(o.out, *c));
      spdlog::error("[eval {}/{}] {} with {} failed: {}", done, todo.size(), c->name, v->name,
                    failures[c->name + "@" + v->name]);
    }
  }
}

json run_experiment(const Experiment& full, const CompareOptions& o) {
  // Before anything is written: a shard's directory holds one experiment, and finished cells their configs.
  const json saved_experiment = experiment_to_json(full);
  if (o.shard.active()) check_same_experiment(saved_experiment, full, o, /*at_end=*/false);
  check_cells_match(full, o);
  // One compare at a time per output directory (per shard: a shard's cells are its own): a second one
  // would train the same cells beside the first and overwrite its files. Shards hold the directory's lock
  // shared, so they run beside one another but never beside a whole-grid compare, which takes every cell.
  fs::create_directories(o.out);
  const FileLock whole(o.out + "/.compare.lock", "--out " + o.out, /*shared=*/o.shard.active());
  std::optional<FileLock> shard;
  if (o.shard.active())
    shard.emplace(o.out + "/.compare-shard-" + std::to_string(o.shard.index) + "-of-" + std::to_string(o.shard.count) + ".lock",
                  "--out " + o.out);
  drop_stale_follow_ups(full, o);
  drop_foreign_cell_files(full, o, adopt_eval_settings(full, o));
  fs::create_directories(o.out + "/cells");
  fs::create_directories(o.out + "/logs");
  fs::create_directories(o.out + "/configs");
  // What `compare --aggregate OUT` reads later, whichever shard gets here first (the same text from each).
  write_file_atomic(o.out + "/experiment.json", saved_experiment.dump(1) + "\n");
  install_stop_handlers();
  Experiment shard_part = full;
  if (o.shard.active()) {
    shard_part.cells.clear();
    for (size_t i = 0; i < full.cells.size(); ++i)
      if (o.shard.owns(i)) shard_part.cells.push_back(full.cells[i]);
    spdlog::info("shard {}/{}: {} of {} cells", o.shard.index, o.shard.count, shard_part.cells.size(), full.cells.size());
  }
  const Experiment& e = shard_part;
  const int n = static_cast<int>(e.cells.size());
  std::map<std::string, std::string> failures;  // cell name -> error
  std::vector<int> todo;
  FollowUps follow_ups(e, o);
  for (int i = 0; i < n; ++i) {
    const auto& c = e.cells[i];
    if (!c.error.empty()) {
      failures[c.name] = c.error;
    } else if (cell_finished(cell_dir(o.out, c))) {
      spdlog::info("{}: finished earlier, skipped", c.name);  // the counters below number the cells to run
      follow_ups.add(c);  // its probes, where an interrupted run left them undone
    } else {
      todo.push_back(i);
    }
  }
  const int threads_per_job = std::max(1, cpu_count() / std::max(1, o.jobs));
  // Under OpenMP binding (OMP_PROC_BIND, OMP_PLACES) each cell pins its first thread to the first CPU it may
  // use: cells sharing one set of CPUs would all pin to the same core. Each running cell gets a slot, its own
  // share of the CPUs; without binding, cells start with compare's own CPUs, as the scheduler likes.
  const std::vector<int> cpus = usable_cpus();
  const bool slice = openmp_binds() && o.jobs > 1;
  struct Running {
    int index;   // into e.cells
    int number;  // its [k/total] in the order cells started: its lines keep it
    int slot;    // its share of the CPUs, 0..jobs-1
    std::chrono::steady_clock::time_point started;
  };
  std::map<pid_t, Running> running;
  auto free_slot = [&] {  // the lowest slot no running cell holds
    for (int slot = 0;; ++slot) {
      bool taken = false;
      for (const auto& [pid, r] : running) taken = taken || r.slot == slot;
      if (!taken) return slot;
    }
  };
  auto slot_cpus = [&](int slot) {
    const size_t share = std::max<size_t>(1, cpus.size() / static_cast<size_t>(std::max(1, o.jobs)));
    std::vector<int> mine;
    for (size_t k = 0; k < share; ++k) mine.push_back(cpus[(slot * share + k) % cpus.size()]);
    return mine;
  };
  // One cell beyond `jobs` at the grid's end (runner_parts::cells_at_once) only where cells cannot get in each
  // other's way but for time: one thread each (no OpenMP team spinning beside another), on the CPU (a GPU's
  // memory is not measured here), not pinned by slot, and with memory for one more of the largest cell yet
  // finished, twice over (a cell that has not finished has not been measured).
  int64_t peak_cell_bytes = 0;
  const bool may_use_cuda = [&] {
    for (int i : todo)
      if (e.cells[i].config.value("device", "auto") != "cpu") return torch::cuda::is_available();
    return false;
  }();
  auto may_share_cores = [&](const json& config) {
    return !slice && !may_use_cuda && config["train"]["threads"] == 1 && peak_cell_bytes > 0 &&
           available_memory_bytes() >= 2 * peak_cell_bytes;
  };
  const auto t0 = std::chrono::steady_clock::now();
  int done = 0, next = 0;
  bool stop_passed = false;  // a stop was passed on to the cells running then
  const int total = static_cast<int>(todo.size());
  double cell_seconds = 0;
  while ((next < total && !stop_requested()) || !running.empty()) {
    for (;;) {
      if (next >= total || stop_requested()) break;
      const auto& c = e.cells[todo[next]];
      json config = c.config;
      if (o.jobs > 1 && config["train"]["threads"] == 0) config["train"]["threads"] = threads_per_job;
      const int running_now = static_cast<int>(running.size());
      // may_share_cores reads the machine's free memory: asked only where the answer is used, at the grid's end.
      const bool last_round = running_now + (total - next) == o.jobs + 1;
      const int at_once = runner_parts::cells_at_once(o.jobs, running_now, total - next, last_round && may_share_cores(config));
      if (running_now >= at_once) break;
      const std::string config_path = o.out + "/configs/" + c.name + ".json";
      write_file_atomic(config_path, config.dump(2) + "\n");
      const bool resuming = is_run_dir(cell_dir(o.out, c));
      const bool evaluating = resuming && runner_parts::cell_status(cell_dir(o.out, c)) == "done";  // trained: evaluated again
      const int slot = free_slot();
      const pid_t pid = spawn_cell(o, c, config_path, slice ? slot_cpus(slot) : std::vector<int>{});
      running[pid] = {todo[next], next + 1, slot, std::chrono::steady_clock::now()};
      const double eta = done > 0 ? cell_seconds / done * (total - done) / o.jobs : -1;
      const std::string beyond = running_now >= o.jobs ? fmt::format("; {} at once to the end, one beyond --jobs", running_now + 1) : "";
      spdlog::info("[{}/{}] {} {} ({} left{}{}; log: {})", next + 1, total,
                   evaluating ? "evaluating" : resuming ? "resuming" : "running", c.name, total - next - 1,
                   eta >= 0 ? ", ETA " + format_duration(eta) : "", beyond, cell_log(o.out, c));
      ++next;
    }
    int status = 0;
    std::vector<pid_t> children;
    for (const auto& [child, r] : running) children.push_back(child);
    int64_t peak_bytes = 0;
    pid_t pid = wait_passing_stop(-1, &status, children, &stop_passed, &peak_bytes);
    if (pid < 0) break;
    auto it = running.find(pid);
    if (it == running.end()) continue;
    const auto& c = e.cells[it->second.index];
    const int k = it->second.number;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.started).count();
    cell_seconds += secs;
    ++done;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok) peak_cell_bytes = std::max(peak_cell_bytes, peak_bytes);
    if (ok) {
      spdlog::info("[{}/{}] {} done in {} ({} of {} done, elapsed {})", k, total, c.name, format_duration(secs), done,
                   total, format_duration(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
      follow_ups.add(c);
    } else if (stopped(status)) {
      spdlog::warn("[{}/{}] {} interrupted; re-run the same command to resume it", k, total, c.name);
      follow_ups.failed(c);
    } else {
      failures[c.name] = last_error(cell_log(o.out, c));
      spdlog::error("[{}/{}] {} failed: {}", k, total, c.name, failures[c.name]);
      follow_ups.failed(c);
    }
    running.erase(it);
  }
  if (!e.eval_grid.empty() && !stop_requested()) run_eval_grid(e, o, failures);
  follow_ups.finish();
  if (o.shard.active()) {
    check_same_experiment(saved_experiment, full, o, /*at_end=*/true);
    spdlog::info("shard {}/{} done; once every shard is: poslab compare --aggregate {}", o.shard.index, o.shard.count, o.out);
    json failed = json::array();
    for (const auto& [name, error] : failures) failed.push_back(name);
    return {{"failed_cells", failed}, {"probe_errors", follow_ups.probe_errors()}};
  }
  return runner_parts::finish(full, o, failures, follow_ups.probe_errors());
}

}  // namespace poslab
