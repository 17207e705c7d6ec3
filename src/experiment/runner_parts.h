// What compare's files share inside the library: where a cell's run and log live and whether it is
// finished, the checks of an output directory before cells run (out_dir.cpp), and the end of an experiment
// (finish.cpp). runner.cpp runs the cells, follow_ups.cpp what follows each. Not part of the API.
#pragma once

#include <map>
#include <set>
#include <string>

#include "config/config.h"
#include "experiment/experiment.h"
#include "train/run_dir.h"
#include "util/files.h"

namespace poslab::runner_parts {

inline std::string cell_dir(const std::string& out, const Cell& c) { return out + "/cells/" + c.name; }
inline std::string cell_log(const std::string& out, const Cell& c) { return out + "/logs/" + c.name + ".log"; }

inline std::string cell_status(const std::string& dir) {
  RunPaths p{dir};
  if (!file_exists(p.summary())) return "";
  try {
    return read_json_file(p.summary()).value("status", "");
  } catch (const ConfigError&) {
    return "";
  }
}

inline bool cell_finished(const std::string& dir) { return cell_status(dir) == "done" && file_exists(RunPaths{dir}.eval()); }

// How many cells may train at once now. `jobs`, or one more at the grid's end: when the cells left to start
// and those running come to jobs + 1, the last round would leave jobs - 1 cores idle while one cell trains
// alone; all of them at once share the cores instead (three one-thread cells on two cores end in 1.5 cells'
// time, not 2), and each cell's results are the same either way; one core has nothing idle to give. `extra` says whether the cells may share
// cores at all (one thread each, on the CPU, memory for one more; runner.cpp decides).
inline int cells_at_once(int jobs, int running, int left, bool extra) {
  return extra && jobs > 1 && left > 0 && running + left == jobs + 1 ? jobs + 1 : jobs;
}

// A cell directory that holds a run (finished or to resume) must hold this cell's config.
void check_cells_match(const Experiment& e, const CompareOptions& o);
// A cell's run trained with other eval.* settings than the experiment's: its config.json takes the experiment's.
// Returns the names of the cells that took them.
std::set<std::string> adopt_eval_settings(const Experiment& e, const CompareOptions& o);
// A shard's output directory holds one experiment: OUT/experiment.json, if there, must be `mine`. Before
// the cells (at_end false) a ConfigError; after them a runtime error (another shard rewrote it meanwhile).
void check_same_experiment(const nlohmann::json& mine, const Experiment& full, const CompareOptions& o, bool at_end);
// Evaluation variants' and probes' files in the cells that an earlier definition of them wrote: removed.
void drop_stale_follow_ups(const Experiment& full, const CompareOptions& o);
// A finished cell's eval.json or probe file that another command wrote over: removed, to be done again.
// `adopted`: cells whose eval settings the experiment changed (adopt_eval_settings): said as such, not as written over.
void drop_foreign_cell_files(const Experiment& full, const CompareOptions& o, const std::set<std::string>& adopted = {});

// results.json and results.csv from the cells, the table printed, and the report drawn (unless plots
// are off or a stop came); `failures`: cell name -> error, `probe_errors` as FollowUps records them.
nlohmann::json finish(const Experiment& e, const CompareOptions& o, const std::map<std::string, std::string>& failures,
                      const nlohmann::json& probe_errors = nlohmann::json::array());

}  // namespace poslab::runner_parts
