// poslab train: a new run from a config (from scratch, or --init-from another run's weights), or
// --resume an existing one; then the config's eval.lengths. Under torchrun, srun or mpirun each
// process is one rank of a data-parallel run (the launcher's variables say which).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <sstream>

#include "cli/commands.h"
#include "cli/validators.h"
#include "distributed/distributed.h"
#include "distributed/launch.h"
#include "eval/evaluator.h"
#include "train/run_dir.h"
#include "train/trainer.h"
#include "util/signals.h"

namespace poslab::cli {

std::vector<int> parse_lengths(const std::string& text, const std::string& option) {
  std::vector<int> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::out_of_range&) {
      throw ConfigError(option + ": '" + item + "' is too large (at most " + std::to_string(std::numeric_limits<int>::max()) + ")");
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || item.empty() || v <= 0)
      throw ConfigError(option + ": '" + item + "' is not a positive integer (expected e.g. 32,64,128)");
    if (std::find(out.begin(), out.end(), v) != out.end()) throw ConfigError(option + ": " + item + " is listed twice");
    out.push_back(v);
  }
  if (out.empty()) throw ConfigError(option + ": expected a comma-separated list of lengths");
  // getline drops an empty last item: "64," would pass as "64" (a length left out, as like as not).
  if (text.back() == ',') throw ConfigError(option + ": '" + text + "' ends with a comma (expected e.g. 32,64,128)");
  return out;
}

namespace {
struct TrainOptions {
  std::string config, out, resume, init_from;
  std::vector<std::string> sets;
  int64_t stop_at = 0;
  bool resume_if_exists = false;
};
}  // namespace

// What `poslab train` does, on this rank of `launch`.
static void train_command(const TrainOptions& o, const Launch& launch) {
  if (launch.rank != 0) spdlog::set_level(spdlog::level::warn);  // rank 0 reports progress for all
  install_stop_handlers();
  TrainResult result;
  std::string dir;
  if (!o.resume.empty()) {
    if (!o.init_from.empty())
      throw ConfigError("--init-from starts a new run and --resume continues one: give one of them");
    if (!o.config.empty() || !o.sets.empty()) throw ConfigError("--resume takes its config from the run; drop --config/--set");
    dir = o.resume;
    become_training_process();
    result = train_resume(dir, o.stop_at, launch);
  } else {
    if (o.config.empty() && o.init_from.empty())
      throw ConfigError("train: --config FILE, --init-from RUN or --resume DIR is required");
    // --init-from without --config: the source run's resolved config, changed by --set.
    if (o.config.empty() && !is_run_dir(o.init_from))
      throw ConfigError("--init-from " + o.init_from + ": " + no_run_here(o.init_from));
    const std::string file = o.config.empty() ? RunPaths{o.init_from}.config() : o.config;
    Config c = load_config(file, o.sets);
    auto source = std::filesystem::path(o.init_from).lexically_normal();
    if (!source.has_filename()) source = source.parent_path();  // "runs/x/" names runs/x
    if (!o.out.empty()) dir = o.out;
    else if (o.config.empty()) dir = source.string() + "-ft";
    else dir = "runs/" + std::filesystem::path(o.config).stem().string() + "-" + c.model.pos_encoding.kind;
    if (o.resume_if_exists && is_run_dir(dir)) {
      // A restarted launch: the run it started before, from its last checkpoint, if it is this config.
      Config saved = RunPaths{dir}.read_config();
      saved.model.vocab_size = c.model.vocab_size;
      // A fine-tune's scaling stretches from the source's length when the config leaves it at 0: the run
      // saved it filled in (read_init_source), from the block size its init_from.json records.
      auto& scaling = c.model.pos_encoding.rope_scaling;
      if (!o.init_from.empty() && scaling.kind != "none" && scaling.original_length == 0 &&
          file_exists(RunPaths{dir}.init_from()))
        scaling.original_length = read_json_file(RunPaths{dir}.init_from()).value("block_size", 0);
      const std::string difference = first_config_difference(config_to_json(saved), config_to_json(c), "there", "here");
      if (!difference.empty())
        throw ConfigError("--resume-if-exists: " + dir + " holds a run of another config (" + difference + "); pick another --out");
      become_training_process();
      spdlog::info("--resume-if-exists: continuing the run in {}", dir);
      result = train_resume(dir, o.stop_at, launch);
    } else {
      become_training_process();
      result = train_new(c, dir, o.stop_at, o.init_from, launch);
    }
  }
  // 130 on every rank when a signal stopped the run, whichever rank it reached; --stop-at is no failure.
  if (result.status == "interrupted") std::exit(result.signalled || stop_requested() ? 130 : 0);
  if (launch.rank != 0) return;  // the evaluation and its eval.json belong to rank 0 too
  // A finished run resumed: its eval.json, if written, stays (poslab eval may have written it at other lengths).
  if (result.was_finished && file_exists(RunPaths{dir}.eval())) {
    spdlog::info("{} is kept (poslab eval --run {} evaluates again)", RunPaths{dir}.eval(), dir);
  } else if (result.status == "done" && !result.config.eval.lengths.empty()) {
    // The run is trained and checkpointed: a stop during its evaluation (which may take minutes) ends it at
    // once, and eval.json, written whole or not at all, is left to `poslab eval` (or a resume, as compare does).
    const std::string stopped = "stopped before the evaluation at eval.lengths finished; the run is trained (" + dir +
                                "/summary.json: done): evaluate it with poslab eval --run " + dir;
    if (stop_requested()) {
      spdlog::warn(stopped);
      std::exit(130);
    }
    exit_on_stop(stopped);
    std::cout << format_eval_table(evaluate_run(dir, EvalOptions{}));
  }
  spdlog::info("run directory: {}", dir);
}

void add_train(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  auto* cmd = app.add_subcommand("train", "Train a GPT from a JSON config (or resume a run)");
  cmd->add_option("--config,-c", o->config, "Config file (JSON; may \"extends\" another)");
  cmd->add_option("--set,-s", o->sets, "Override a key: --set model.pos_encoding.kind=rope (repeatable)");
  cmd->add_option("--out,-o", o->out, "Run directory (default runs/<config name>-<encoding>)");
  cmd->add_option("--resume", o->resume, "Continue the run in this directory from its checkpoint");
  cmd->add_option("--init-from", o->init_from,
                  "Start a new run from this run's weights (new optimizer and schedule; e.g. a longer block_size); "
                  "without --config, from its config too (default --out: RUN-ft)");
  cmd->add_flag("--resume-if-exists", o->resume_if_exists,
                "With --config: continue the run in --out when it exists (the same config), else start it; the "
                "command a launcher restarts after a failure (torchrun --max_restarts)");
  cmd->add_option("--stop-at", o->stop_at, "Checkpoint and stop before this step (resume later with --resume)")
      ->check(positive_integer());
  cmd->callback([o] {
    const Launch launch = detect_launch();  // a bad launch variable is refused here, before anything
    try {
      train_command(*o, launch);
    } catch (const std::exception& e) {
      tell_peers_of_failure(launch, e.what());  // before the rendezvous, the other ranks would wait for this one
      throw;
    }
  });
}

}  // namespace poslab::cli
