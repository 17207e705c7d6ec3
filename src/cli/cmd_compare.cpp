// poslab compare: run an experiment grid and aggregate it into a table, plots and a report.
#include <spdlog/spdlog.h>

#include <filesystem>

#include "cli/commands.h"
#include "config/config.h"
#include "experiment/experiment.h"
#include "util/scripts.h"

namespace poslab::cli {

void add_compare(CLI::App& app) {
  struct Opts {
    std::string config, out;
    int jobs = 1;
    bool no_plots = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("compare", "Run an experiment grid (e.g. every encoding on one task), then write "
                                            "results.json/.csv, plots and report.md/.html");
  cmd->add_option("--config,-c", o->config, "Experiment file (configs/experiments/*.json)")->required();
  cmd->add_option("--out,-o", o->out, "Output directory (default runs/<experiment name>)");
  cmd->add_option("--jobs,-j", o->jobs, "Cells to run at once (each gets cores/jobs threads)")->check(CLI::PositiveNumber);
  cmd->add_flag("--no-plots", o->no_plots, "Skip the matplotlib plots and report");
  cmd->callback([o] {
    Experiment e = load_experiment(o->config);
    CompareOptions co;
    co.out = o->out.empty() ? "runs/" + e.name : o->out;
    co.jobs = o->jobs;
    co.poslab_binary = std::filesystem::read_symlink("/proc/self/exe").string();
    co.plot_script = o->no_plots ? "" : find_script("plot_report.py");
    if (!o->no_plots && co.plot_script.empty()) spdlog::warn("scripts/plot_report.py not found: no plots (set POSLAB_SCRIPTS)");
    spdlog::info("experiment {}: {} cells -> {}", e.name, e.cells.size(), co.out);
    run_experiment(e, co);
  });
}

}  // namespace poslab::cli
