// Runs an experiment's cells as child `poslab train` processes (a crash fails one cell, not the
// grid), skipping finished cells and resuming interrupted ones, with progress and an ETA.
#include <fcntl.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <thread>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "config/config.h"
#include "eval/evaluator.h"
#include "distributed/launch.h"
#include "eval/attention_stats.h"
#include "experiment/experiment.h"
#include "probe/probe.h"
#include "train/run_dir.h"
#include "util/affinity.h"
#include "util/files.h"
#include "util/progress.h"
#include "util/runtime.h"
#include "util/scripts.h"
#include "util/signals.h"

extern char** environ;

namespace poslab {
namespace fs = std::filesystem;
using nlohmann::json;

static std::string cell_dir(const std::string& out, const Cell& c) { return out + "/cells/" + c.name; }
static std::string cell_log(const std::string& out, const Cell& c) { return out + "/logs/" + c.name + ".log"; }

static std::string cell_status(const std::string& dir) {
  RunPaths p{dir};
  if (!file_exists(p.summary())) return "";
  try {
    return read_json_file(p.summary()).value("status", "");
  } catch (const ConfigError&) {
    return "";
  }
}

static bool cell_finished(const std::string& dir) { return cell_status(dir) == "done" && file_exists(RunPaths{dir}.eval()); }

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
static pid_t wait_passing_stop(pid_t pid, int* status, const std::vector<pid_t>& children, bool* passed) {
  for (;;) {
    if (stop_requested() && !*passed) {
      *passed = true;
      for (pid_t child : children) ::kill(child, SIGINT);
    }
    const pid_t got = ::waitpid(pid, status, WNOHANG);
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

// What follows a finished cell in this process: its retrieval probes (a second or so each), then the
// attention statistics for the report. One worker thread does it beside the cells still training, so it
// fills the cores' slack (start-ups, the last cell alone) instead of a phase of its own after them: on 2
// cores the main job's 21 probes took 16 s after the cells (docs/benchmarks.md). Always on one intra-op
// thread: while cells train the cores are theirs, and a fixed count keeps the scores independent of which
// cells happened to be running (a probe's log-probabilities differ in the 8th digit between 1 and 2
// threads). One worker rather than several: the thread count and the fused-ops switch are process-wide. A
// failure is reported and costs only that cell's probe columns or attention picture; the loss results stand.
class FollowUps {
 public:
  FollowUps(const Experiment& e, const CompareOptions& o) : e_(e), o_(o) {
    for (const auto& c : e.cells)
      if (c.error.empty()) planned_ += static_cast<int>(pending_probes(c).size());
    worker_ = std::thread([this] { work(); });
  }
  ~FollowUps() { finish(); }
  FollowUps(const FollowUps&) = delete;
  FollowUps& operator=(const FollowUps&) = delete;

  // A cell that finished: its probes and statistics are queued.
  void add(const Cell& c) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(&c);
    }
    wake_.notify_one();
  }
  // A cell that failed: its probes leave the count.
  void failed(const Cell& c) {
    std::lock_guard<std::mutex> lock(mu_);
    planned_ -= static_cast<int>(pending_probes(c).size());
  }
  // No more cells: returns when what is queued is done (or a stop was asked for).
  void finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    wake_.notify_one();
    if (worker_.joinable()) worker_.join();
  }

 private:
  std::vector<std::string> pending_probes(const Cell& c) const {
    std::vector<std::string> tasks;
    for (auto it = e_.probes.begin(); it != e_.probes.end(); ++it)
      if (!file_exists(cell_dir(o_.out, c) + "/probe-" + it.key() + ".json")) tasks.push_back(it.key());
    return tasks;
  }

  void work() {
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

  void follow(const Cell& c) {
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

  int planned() {
    std::lock_guard<std::mutex> lock(mu_);
    return planned_;
  }

 public:
  // The probes that failed: [{"cell", "task", "error"}] (read after finish()).
  json probe_errors() {
    std::lock_guard<std::mutex> lock(mu_);
    return probe_errors_;
  }

 private:
  json probe_errors_ = json::array();

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

static json finish(const Experiment& e, const CompareOptions& o, const std::map<std::string, std::string>& failures,
                   const json& probe_errors = json::array());

// A cell directory that holds a run (finished or to resume) must hold this cell's config: an experiment file
// edited between two runs into the same --out would otherwise mix old cells into new results. The thread
// count is compare's own choice (-j) and the vocabulary size comes from the data: neither counts.
static void check_cells_match(const Experiment& e, const CompareOptions& o) {
  for (const auto& c : e.cells) {
    const std::string dir = cell_dir(o.out, c);
    if (!c.error.empty() || !is_run_dir(dir)) continue;
    const Config want = config_from_json(c.config);
    Config saved = config_from_json(read_json_file(RunPaths{dir}.config()));
    saved.model.vocab_size = want.model.vocab_size;
    saved.train.threads = want.train.threads;
    const json a = config_to_json(saved), b = config_to_json(want);
    const auto diff = json::diff(a, b);
    if (diff.empty()) continue;
    // The key as a config names it (eval.lengths), a list whole: a diff inside it points at an element
    // ("/eval/lengths/-", appended), which says nothing to a reader.
    json::json_pointer at(diff[0]["path"].get<std::string>());
    while (!at.empty() && (at.back() == "-" || at.back().find_first_not_of("0123456789") == std::string::npos))
      at = at.parent_pointer();
    std::string key = at.to_string().substr(1);
    std::replace(key.begin(), key.end(), '/', '.');
    throw ConfigError("--out " + o.out + ": cell " + c.name + " holds a run of another config (" + key + " is " +
                      (a.contains(at) ? a.at(at).dump() : "unset") + " there, " + (b.contains(at) ? b.at(at).dump() : "unset") +
                      " in the experiment); use another --out, or remove " + dir + " to train it again");
  }
}

// Where OUT/experiment.json, as saved, and this experiment differ: "" when they are one experiment (its
// file's path and description aside: a copy of the file elsewhere is the same experiment), else the first
// differing key as "KEY: SAVED there, MINE here".
static std::string experiment_difference(const json& saved, const json& mine) {
  json a = saved, b = mine;
  for (json* j : {&a, &b}) j->erase("path"), j->erase("description");
  // Saved by a poslab that kept no digests: the cells' names and settings are what can be compared.
  if (a.contains("cells") && b.contains("cells") && !a["cells"].empty() && !a["cells"][0].contains("config_sha256"))
    for (auto& c : b["cells"]) c.erase("config_sha256");
  const auto diff = json::diff(a, b);
  if (diff.empty()) return "";
  const std::string path = diff[0]["path"].get<std::string>();
  const json::json_pointer at(path);
  return path + ": " + (a.contains(at) ? a.at(at).dump() : "unset") + " there, " + (b.contains(at) ? b.at(at).dump() : "unset") +
         " here";
}

// A shard's output directory is shared with the experiment's other shards: they must all run one
// experiment, from one file, or aggregating them would average cells of different configs as seeds.
static void check_same_experiment(const json& mine, const CompareOptions& o, bool at_end) {
  const std::string saved_path = o.out + "/experiment.json";
  if (!file_exists(saved_path)) return;
  const std::string difference = experiment_difference(read_json_file(saved_path), mine);
  if (difference.empty()) return;
  if (!at_end)
    throw ConfigError("--out " + o.out + ": experiment.json there is another experiment's (" + difference +
                      "); every shard of one output directory runs the same experiment file: use another --out");
  throw std::runtime_error(saved_path + " was rewritten by a shard of another experiment while this one ran (" + difference +
                           "): these shards are not one experiment, and --aggregate will refuse their mixed cells");
}

// An evaluation variant or probe whose definition changed since the run that wrote OUT/experiment.json:
// its files in the cells are of the old definition, and would be reused under the new one's name. They
// are removed, so that this run does them again.
static void drop_stale_follow_ups(const Experiment& full, const CompareOptions& o) {
  const std::string path = o.out + "/experiment.json";
  if (!file_exists(path)) return;
  json saved;
  try {
    saved = read_json_file(path);
  } catch (const ConfigError&) {
    return;  // not ours to judge: check_same_experiment and --aggregate read it with their own errors
  }
  std::vector<std::string> stale_names;  // "eval_grid.NAME", "probes.TASK"
  std::vector<std::string> stale_files;  // relative to a cell's directory
  std::map<std::string, json> old_variants;
  for (const auto& v : saved.value("eval_grid", json::array())) old_variants[v.value("name", "")] = v.value("overrides", json());
  for (const auto& v : full.eval_grid)
    if (old_variants.count(v.name) && old_variants[v.name] != json(v.overrides)) {
      stale_names.push_back("eval_grid." + v.name);
      stale_files.push_back("eval-" + v.name + ".json");
    }
  const json old_probes = saved.value("probes", json::object());
  for (auto it = full.probes.begin(); it != full.probes.end(); ++it)
    if (old_probes.contains(it.key()) && old_probes[it.key()] != it.value()) {
      stale_names.push_back("probes." + it.key());
      for (const char* ext : {".json", ".png"}) stale_files.push_back("probe-" + it.key() + ext);
    }
  if (stale_names.empty()) return;
  std::vector<std::string> paths;
  for (const auto& c : full.cells)
    for (const auto& f : stale_files) paths.push_back(cell_dir(o.out, c) + "/" + f);
  const auto removed = remove_stale_files(paths);
  std::string names;
  for (const auto& n : stale_names) names += (names.empty() ? "" : ", ") + n;
  spdlog::info("{} changed since the last run into {}: done again ({} earlier file(s) removed)", names, o.out, removed.size());
}

// A finished cell's eval.json or probe file that another command wrote over (`poslab eval --run CELL --lengths
// 64` without --tag) holds other settings than the experiment's: aggregated, it would mix them into the
// tables (a length missing, a 3-trial interval beside 50-trial ones) with exit 0. Such a file is removed and
// done again, and said so. Compared: an evaluation's recorded settings against the cell's; a probe file against
// what the experiment's "probes" entry would write on the cell (probe_file_differs: every option, the run's
// defaults for those it leaves unset, and the RoPE scaling).
static void drop_foreign_cell_files(const Experiment& full, const CompareOptions& o) {
  auto lengths_of = [](const json& results) {
    std::set<int> out;
    for (const auto& r : results)
      if (r.is_object() && r.contains("length") && r["length"].is_number_integer()) out.insert(r["length"].get<int>());
    return out;
  };
  auto read = [](const std::string& path) -> json {
    try {
      return file_exists(path) ? read_json_file(path) : json();
    } catch (const ConfigError&) {
      return json();  // damaged: the aggregate names it
    }
  };
  auto text = [](const std::set<int>& v) {
    std::string out;
    for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
    return "[" + out + "]";
  };
  // What differs between an eval file's recorded settings and those the experiment evaluates it with.
  auto settings_differ = [&](const json& file, const json& want) -> std::string {
    if (!file.contains("settings")) {  // written before eval.json recorded them: its lengths alone
      std::set<int> asked;
      for (const auto& L : want["eval"]["lengths"]) asked.insert(L.get<int>());
      const auto got = lengths_of(file["results"]);
      return got == asked ? "" : "lengths " + text(got) + ", not the experiment's " + text(asked);
    }
    const json& got = file["settings"];
    if (got.value("rope_scaling_flag", json()).is_object())
      return "--rope-scaling " + got["rope_scaling_flag"].value("kind", std::string("?"));
    const json a = got.value("eval", json::object()), b = want["eval"];
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key()) || a[it.key()] != it.value())
        return "eval." + it.key() + " " + (a.contains(it.key()) ? a[it.key()].dump() : std::string("unset")) +
               ", not the experiment's " + it.value().dump();
    return "";
  };
  for (size_t i = 0; i < full.cells.size(); ++i) {
    const auto& c = full.cells[i];
    const std::string dir = cell_dir(o.out, c);
    if (o.shard.active() && !o.shard.owns(i)) continue;  // another shard's cell: that shard redoes it
    if (!c.error.empty() || !c.config.is_object() || cell_status(dir) != "done") continue;
    // The cell's own evaluation, then each variant's (its overrides on the cell's config, as `eval --set`).
    std::vector<std::pair<std::string, std::vector<std::string>>> files = {{"", {}}};
    for (const auto& v : full.eval_grid) files.push_back({v.name, v.overrides});
    for (const auto& [tag, overrides] : files) {
      const std::string path = RunPaths{dir}.eval(tag);
      const json file = read(path);
      if (!file.is_object() || !file["results"].is_array()) continue;
      json want;
      try {
        json j = c.config;
        apply_overrides(j, overrides);
        want = evaluation_settings(config_from_json(j), EvalOptions{});
      } catch (const std::exception&) {
        continue;  // the experiment's own checks say what is wrong with it
      }
      const std::string differs = settings_differ(file, want);
      if (differs.empty()) continue;
      spdlog::warn("{}: evaluated with {} (written over by another command?): evaluated again", path, differs);
      remove_stale_files({path});
    }
    for (auto it = full.probes.begin(); it != full.probes.end(); ++it) {
      const std::string file = dir + "/probe-" + it.key() + ".json";
      const json probe = read(file);
      if (!probe.is_object()) continue;
      std::string differs;
      try {
        differs = probe_file_differs(probe, probe_options_from_json(it.key(), it.value(), "probes." + it.key()),
                                     config_from_json(c.config));
      } catch (const std::exception&) {
        continue;  // the experiment's own checks say what is wrong with it
      }
      if (differs.empty()) continue;
      spdlog::warn("{}: probed with {} (written over by another command?): probed again", file, differs);
      remove_stale_files({file, dir + "/probe-" + it.key() + ".png"});
    }
  }
}

json run_experiment(const Experiment& full, const CompareOptions& o) {
  // Before anything is written: a shard's directory holds one experiment, and finished cells their configs.
  const json saved_experiment = experiment_to_json(full);
  if (o.shard.active()) check_same_experiment(saved_experiment, o, /*at_end=*/false);
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
  drop_foreign_cell_files(full, o);
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
  const auto t0 = std::chrono::steady_clock::now();
  int done = 0, next = 0;
  bool stop_passed = false;  // a stop was passed on to the cells running then
  const int total = static_cast<int>(todo.size());
  double cell_seconds = 0;
  while ((next < total && !stop_requested()) || !running.empty()) {
    while (next < total && static_cast<int>(running.size()) < o.jobs && !stop_requested()) {
      const auto& c = e.cells[todo[next]];
      json config = c.config;
      if (o.jobs > 1 && config["train"]["threads"] == 0) config["train"]["threads"] = threads_per_job;
      const std::string config_path = o.out + "/configs/" + c.name + ".json";
      write_file_atomic(config_path, config.dump(2) + "\n");
      const bool resuming = is_run_dir(cell_dir(o.out, c));
      const int slot = free_slot();
      const pid_t pid = spawn_cell(o, c, config_path, slice ? slot_cpus(slot) : std::vector<int>{});
      running[pid] = {todo[next], next + 1, slot, std::chrono::steady_clock::now()};
      const double eta = done > 0 ? cell_seconds / done * (total - done) / o.jobs : -1;
      spdlog::info("[{}/{}] {} {} ({} left{}; log: {})", next + 1, total,
                   resuming ? "resuming" : "running", c.name, total - next - 1,
                   eta >= 0 ? ", ETA " + format_duration(eta) : "", cell_log(o.out, c));
      ++next;
    }
    int status = 0;
    std::vector<pid_t> children;
    for (const auto& [child, r] : running) children.push_back(child);
    pid_t pid = wait_passing_stop(-1, &status, children, &stop_passed);
    if (pid < 0) break;
    auto it = running.find(pid);
    if (it == running.end()) continue;
    const auto& c = e.cells[it->second.index];
    const int k = it->second.number;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.started).count();
    cell_seconds += secs;
    ++done;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
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
    check_same_experiment(saved_experiment, o, /*at_end=*/true);
    spdlog::info("shard {}/{} done; once every shard is: poslab compare --aggregate {}", o.shard.index, o.shard.count, o.out);
    json failed = json::array();
    for (const auto& [name, error] : failures) failed.push_back(name);
    return {{"failed_cells", failed}, {"probe_errors", follow_ups.probe_errors()}};
  }
  return finish(full, o, failures, follow_ups.probe_errors());
}

json finish_experiment(const Experiment& e, const CompareOptions& o, bool require_all) {
  // Each cell trained what the experiment says (shards started from different experiment files share
  // one directory otherwise unnoticed): its saved config's digest against the experiment's.
  for (const auto& c : e.cells) {
    const std::string dir = cell_dir(o.out, c);
    if (c.config_digest.empty() || !is_run_dir(dir)) continue;
    if (cell_config_digest(read_json_file(RunPaths{dir}.config())) != c.config_digest)
      throw ConfigError("--aggregate " + o.out + ": cell " + c.name + " was trained with another config than " + o.out +
                        "/experiment.json describes (a shard run from another experiment file?); train it again "
                        "into another --out");
  }
  if (require_all) {
    std::vector<std::string> missing;
    for (const auto& c : e.cells) {
      // A cell whose run failed (diverged, say) is finished too: results.json records it failed, as one compare does.
      const std::string dir = cell_dir(o.out, c), status = cell_status(dir);
      const bool finished = status == "failed" || (status == "done" && file_exists(RunPaths{dir}.eval()));
      if (c.error.empty() && !finished) missing.push_back(c.name);
    }
    for (const auto& c : e.cells)
      for (const auto& v : e.eval_grid)
        if (cell_finished(cell_dir(o.out, c)) && !file_exists(RunPaths{cell_dir(o.out, c)}.eval(v.name)))
          missing.push_back(c.name + "@" + v.name);
    if (!missing.empty()) {
      std::string list;
      for (size_t i = 0; i < missing.size() && i < 8; ++i) list += (i ? ", " : "") + missing[i];
      if (missing.size() > 8) list += ", ... (" + std::to_string(missing.size()) + " in all)";
      throw ConfigError("--aggregate " + o.out + ": " + std::to_string(missing.size()) + " cell(s) not finished yet: " + list);
    }
  }
  return finish(e, o, {});
}

static json finish(const Experiment& e, const CompareOptions& o, const std::map<std::string, std::string>& failures,
                   const json& probe_errors) {
  json results = aggregate_results(e, o.out, failures);
  // A probe that failed: its cell's losses stand, the probe's columns are missing; recorded, and compare fails.
  if (!probe_errors.empty()) results["probe_errors"] = probe_errors;
  write_file_atomic(o.out + "/results.json", results.dump(1) + "\n");
  write_file_atomic(o.out + "/results.csv", results_csv(results));
  // The report and its pictures (scripts/plot_report.py) showed the results before these: removed, and drawn
  // again below unless plots are off or the run was stopped.
  std::vector<std::string> report_files;
  for (const char* name : {"report.html", "report.md", "extrapolation.png", "loss_curves.png", "position_loss.png",
                           "attention.png", "retrieval.png", "retrieval_heatmaps.png"})
    report_files.push_back(o.out + "/" + name);
  const bool stale_report = !remove_stale_files(report_files).empty();
  std::cout << "\n" << format_results_table(results);
  // The script as this poslab finds it (an install keeps it under share/poslab/scripts).
  const std::string script = !o.plot_script.empty() ? o.plot_script : find_script("plot_report.py");
  const std::string redraw = "python3 " + (script.empty() ? std::string("scripts/plot_report.py") : script) + " " + o.out;
  if (stale_report && (o.plot_script.empty() || stop_requested()))
    spdlog::info("removed {}/report.html and its pictures: they showed earlier results (draw them again with {})", o.out,
                 redraw);
  if (stop_requested()) {
    spdlog::warn("interrupted: re-run the same command to finish the remaining cells");
    return results;
  }
  if (!o.plot_script.empty()) {
    const int rc = run_python_script(o.plot_script, {o.out});
    if (rc != 0 && (stop_requested() || rc == 128 + SIGINT || rc == 128 + SIGTERM)) {  // 130: the script's own Ctrl-C exit too
      // Stopped while drawing: the pictures it had drawn go too, so that no report stands half made.
      remove_stale_files(report_files);
      if (!stop_requested()) request_stop();  // compare then exits 130, as for any stop
      spdlog::warn("interrupted while drawing the report: the results are written; draw it with {}", redraw);
    } else if (rc == kPlotsNoMatplotlib) {
      spdlog::warn("plots skipped: {} needs python3-matplotlib; draw them later with {}", o.plot_script, redraw);
    } else if (rc != 0) {
      // A report that failed half-way (a full disk) is not left standing: its files go, and compare fails.
      remove_stale_files(report_files);
      throw std::runtime_error("the report failed: " + o.plot_script + " " + plot_failure(rc) + "; the results are written (" +
                               o.out + "/results.json, results.csv): draw the report again with " + redraw);
    } else {
      spdlog::info("report: {}/report.html (and report.md)", o.out);
    }
  }
  return results;
}

}  // namespace poslab
