// An experiment's end: results.json and results.csv from its cells, the table on the console, and the
// report drawn by scripts/plot_report.py; and `compare --aggregate`'s checks that every cell is there.
#include <spdlog/spdlog.h>

#include <csignal>
#include <iostream>

#include "experiment/runner_parts.h"
#include "util/scripts.h"
#include "util/signals.h"

namespace poslab {
using nlohmann::json;
using runner_parts::cell_dir;
using runner_parts::cell_finished;
using runner_parts::cell_status;

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
  return runner_parts::finish(e, o, {});
}

json runner_parts::finish(const Experiment& e, const CompareOptions& o, const std::map<std::string, std::string>& failures,
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
