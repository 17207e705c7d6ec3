// poslab compare: run an experiment grid and aggregate it into a table, plots and a report.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "cli/commands.h"
#include "cli/validators.h"
#include "config/config.h"
#include "experiment/experiment.h"
#include "train/run_dir.h"
#include "util/files.h"
#include "util/runtime.h"
#include "util/scripts.h"
#include "util/signals.h"

namespace poslab::cli {

void add_compare(CLI::App& app) {
  struct Opts {
    std::string config, out, shard, aggregate;
    int jobs = 0;  // 0: the experiment's "jobs", else 1
    bool no_plots = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("compare", "Run an experiment grid (e.g. every encoding on one task), then write "
                                            "results.json/.csv, plots and report.md/.html");
  cmd->add_option("--config,-c", o->config, "Experiment file (configs/experiments/*.json)");
  cmd->add_option("--out,-o", o->out, "Output directory (default runs/<experiment name>)");
  cmd->add_option("--jobs,-j", o->jobs, "Cells to run at once, each with cores/jobs threads; one more for the last round where it would leave cores idle (one-thread CPU cells) (default: the experiment's \"jobs\", else 1)")
      ->check(positive_integer());
  cmd->add_option("--shard", o->shard,
                  "K/N: run only the cells whose index modulo N is K, then stop without aggregating (default: from "
                  "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT or JOB_COMPLETION_INDEX/POSLAB_SHARD_COUNT when set)");
  cmd->add_option("--aggregate", o->aggregate,
                  "DIR: build results, table and report from the cells every shard wrote to DIR (refused while cells "
                  "are missing; names them)");
  cmd->add_flag("--no-plots", o->no_plots, "Skip the matplotlib plots and report");
  cmd->callback([o] {
    CompareOptions co;
    co.jobs = std::max(1, o->jobs);
    co.poslab_binary = std::filesystem::read_symlink("/proc/self/exe").string();
    // Said once, after the re-exec of become_training_process() (the aggregate step trains nothing and has none).
    auto find_plot_script = [&] {
      co.plot_script = o->no_plots ? "" : find_script("plot_report.py");
      if (!o->no_plots && co.plot_script.empty()) spdlog::warn("scripts/plot_report.py not found: no plots (set POSLAB_SCRIPTS)");
    };
    // A cell that failed fails the command (exit 1), after the others ran and the table was written.
    auto fail_on_failed_cells = [](const nlohmann::json& results, const std::string& out, bool shard) {
      std::vector<std::string> failed;
      for (const auto& c : results.value("cells", nlohmann::json::array()))
        if (c["status"] == "failed") failed.push_back(c["name"]);
      for (const auto& name : results.value("failed_cells", nlohmann::json::array())) failed.push_back(name);
      const auto probe_errors = results.value("probe_errors", nlohmann::json::array());
      if (failed.empty() && !probe_errors.empty())
        throw std::runtime_error(std::to_string(probe_errors.size()) + " probe(s) failed (first: " +
                                 probe_errors[0]["cell"].get<std::string>() + " " + probe_errors[0]["task"].get<std::string>() +
                                 ": " + probe_errors[0]["error"].get<std::string>() + ")" +
                                 (shard ? "" : "; listed in " + out + "/results.json under probe_errors"));
      if (!failed.empty()) {
        std::string names;
        for (size_t i = 0; i < failed.size() && i < 4; ++i) names += (i ? ", " : "") + failed[i];
        if (failed.size() > 4) names += ", ...";
        // A shard writes no results.json: compare --aggregate does, once every shard is done.
        throw std::runtime_error(std::to_string(failed.size()) + " cell(s) failed (" + names + "); their errors are in " +
                                 (shard ? out + "/logs/ (compare --aggregate " + out + " records them in results.json)"
                                        : out + "/results.json and " + out + "/logs/"));
      }
    };
    if (!o->aggregate.empty()) {
      if (!o->config.empty() || !o->shard.empty() || !o->out.empty())
        throw ConfigError("compare --aggregate DIR takes the experiment from DIR/experiment.json and writes into DIR; "
                          "drop --config/--shard/--out");
      const std::string saved = o->aggregate + "/experiment.json";
      if (!file_exists(saved))
        throw ConfigError("--aggregate " + o->aggregate + ": no experiment.json here (not a poslab compare output directory)");
      co.out = o->aggregate;
      check_run_writable(co.out, "results.json", "--aggregate");  // before any work, not after it
      find_plot_script();
      Experiment e = experiment_from_json(read_json_file(saved), saved);
      fail_on_failed_cells(finish_experiment(e, co, /*require_all=*/true), co.out, /*shard=*/false);
      return;
    }
    if (o->config.empty()) throw ConfigError("compare: give --config EXPERIMENT.json (or --aggregate DIR)");
    Experiment e = load_experiment(o->config);
    co.out = o->out.empty() ? "runs/" + e.name : o->out;
    // The file's "jobs" is a suggestion for a machine like the one it was measured on: never more
    // cells at once than cores. -j is the user's word and is taken as given.
    if (o->jobs == 0 && e.jobs > 0)
      co.jobs = std::max(1, std::min(e.jobs, cpu_count()));
    co.shard = shard_from(o->shard);
    check_output_dir(co.out, "--out");
    // A train run's directory: the grid's cells, results and report would be written among its files.
    if (is_run_dir(co.out))
      throw ConfigError("--out " + co.out + ": holds a poslab train run (config.json), not an experiment's output; "
                        "pick another --out");
    // Nor inside one, nor in another compare output's cells/, logs/ or configs/ (its own cells are runs).
    if (const std::string in = inside_another_output(co.out, /*in_runs=*/true); !in.empty())
      throw ConfigError("--out " + co.out + ": lies inside " + in + ": an experiment's output there would mix with its "
                        "files; pick another --out");
    become_training_process();  // the input checked: a mistake in it is reported by this image
    find_plot_script();
    spdlog::info("experiment {}: {} cells -> {}", e.name, e.cells.size(), co.out);
    const nlohmann::json results = run_experiment(e, co);
    if (stop_requested()) std::exit(130);  // interrupted: the cells checkpointed; the same command resumes them
    fail_on_failed_cells(results, co.out, co.shard.active());
  });
}

}  // namespace poslab::cli
