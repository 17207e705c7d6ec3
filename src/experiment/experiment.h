// Experiments: a base config plus lists of values for any keys (a grid), run cell by cell as
// ordinary run directories, then aggregated over seeds into one results table.
#pragma once
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace poslab {

struct Cell {
  std::string name;         // e.g. "kind=rope_seed=1"
  std::string group;        // the grid values except seed, e.g. "rope" or "rope, task=sort"
  nlohmann::json settings;  // {"model.pos_encoding.kind": "rope", "seed": 1}
  nlohmann::json config;    // the full resolved config of the cell
  std::string error;        // set when the cell's config is invalid
  std::string config_digest;  // cell_config_digest(config); read back from experiment.json ("" in older ones)
};

// A digest of what a cell trains: its config resolved, leaving out what may differ between the machines
// that run one experiment's shards (threads; the vocabulary size, filled in from the data). Two cells of
// one digest train the same model on the same data.
std::string cell_config_digest(const nlohmann::json& config);

// An evaluation-only setting (e.g. a RoPE scaling): every trained cell is evaluated once per
// variant, into its run's eval-NAME.json, without retraining.
struct EvalVariant {
  std::string name;                    // e.g. "yarn"
  std::vector<std::string> overrides;  // "eval.rope_scaling.kind=\"yarn\"", ...
};

struct Experiment {
  std::string name, path, description;
  nlohmann::json grid;                  // key -> list of values, in file order
  std::vector<std::string> group_keys;  // grid keys other than "seed"
  std::vector<Cell> cells;
  std::vector<EvalVariant> eval_grid;   // empty: each cell's own eval.json
  // Cells run at once when --jobs is not given ("jobs" in the file; 0: one at a time). The file says
  // what suits its grid (small models run faster side by side than on all cores one after another).
  int jobs = 0;
  // Retrieval probes run on every trained cell: task -> options (probe/probe.h), validated at load.
  nlohmann::json probes = nlohmann::json::object();
};

// Reads an experiment file: {"name", "description", "base", "set": {key: value}, "grid": {key: [values]},
// "seeds": [..], "eval_grid": {variant name: {eval key: value}}, "probes": {task: {option: value}}, "jobs": N}.
// "base" is a config path relative to the experiment file. Throws ConfigError naming the key.
Experiment load_experiment(const std::string& path);

// One of N shards of a grid: cells whose index modulo `count` is `index`.
struct Shard {
  int index = 0, count = 1;
  bool active() const { return count > 1; }
  bool owns(size_t cell) const { return static_cast<int>(cell % count) == index; }
};
// "K/N" from --shard, else SLURM_ARRAY_TASK_ID (minus SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_COUNT,
// else JOB_COMPLETION_INDEX / POSLAB_SHARD_COUNT (Kubernetes Indexed Jobs); else no sharding.
// Throws ConfigError naming the flag or variable when a value is malformed or out of range.
Shard shard_from(const std::string& flag);

// The experiment as compare ran it, saved in OUT/experiment.json so `compare --aggregate OUT` needs
// no config file (and aggregates exactly the cells the shards ran).
nlohmann::json experiment_to_json(const Experiment& experiment);
Experiment experiment_from_json(const nlohmann::json& saved, const std::string& where);

struct CompareOptions {
  std::string out;
  int jobs = 1;
  Shard shard;
  std::string poslab_binary;  // the executable that trains a cell (normally this one)
  std::string plot_script;    // scripts/plot_report.py; empty = do not plot
};

// Runs every cell (skipping finished ones, resuming interrupted ones), aggregates, writes
// results.json / results.csv, and makes the plots and report. Returns the results (a shard:
// {"failed_cells": [names]}).
nlohmann::json run_experiment(const Experiment& experiment, const CompareOptions& options);
// The grid key whose values a report compares (the encoding when it is in the grid; else the
// first grid key); the other keys form scenarios.
std::string experiment_item_key(const Experiment& experiment);
// The group of a cell's rows: its own, or with an eval grid the variant's ("rope, eval=yarn"; the variant's
// name alone when the grid has one group).
std::string unit_group(const Experiment& experiment, const Cell& cell, const EvalVariant* variant);
std::string unit_group(const Experiment& experiment, const Cell& cell, const std::string& variant);
// Whether every cell trains in one group (the grid varies only the seed, or keys of one value).
bool one_training_group(const Experiment& experiment);
// A grid value as cell names, groups and report rows spell it: a string as itself, anything else as JSON.
std::string grid_value_text(const nlohmann::json& value);
// The scenario a group stands in, as report rows name it: each of `keys` beside `item_key` that the group's
// `settings` hold and the grid varies, "name=value, ..." (a key by its last part, which `named` collects).
std::string scenario_text(const Experiment& experiment, const std::vector<std::string>& keys,
                          const nlohmann::json& settings, const std::string& item_key, std::set<std::string>* named = nullptr);
// Aggregation alone, from the cells' run directories under `out` (used by run_experiment and tests).
// Writes results.json/.csv, the table and the report; with `require_all`, refuses (ConfigError
// naming them) while cells are missing.
nlohmann::json finish_experiment(const Experiment& experiment, const CompareOptions& options, bool require_all);
// `failures`: cells that failed in this compare (by cell name, or NAME@VARIANT for an eval_grid variant),
// with the error; their rows and the rows of their groups say "failed".
nlohmann::json aggregate_results(const Experiment& experiment, const std::string& out,
                                 const std::map<std::string, std::string>& failures = {});
// The console table: one row per group, one column per length (exact match or loss), best marked.
std::string format_results_table(const nlohmann::json& results);
// What a row's group is, as the tables head their first column: "encoding", "evaluation" (an eval grid over
// one trained group) or "group".
std::string group_label(const nlohmann::json& results);
// results.csv: one record per row of results.json, its fields in this order (RFC 4180, util/csv.h).
inline const std::vector<std::string> kResultsCsvFields = {
    "group",          "item",           "scenario",         "length",          "tokens",
    "n",              "status",         "loss_mean",        "loss_std",        "loss_ci95",
    "ppl_mean",       "ppl_std",        "ppl_ci95",         "token_acc_mean",  "token_acc_std",
    "token_acc_ci95", "exact_match_mean", "exact_match_std", "exact_match_ci95", "best",
    "params",         "tokens_per_s_mean", "wall_s_mean",
    // Retrieval probes beside loss (null where the experiment runs none): see add_probe_results.
    "passkey_exact_mean", "passkey_exact_ci95", "passkey_exact_low", "passkey_exact_high", "passkey_effective_length_mean",
    "mqar_exact_mean",    "mqar_exact_ci95",    "mqar_exact_low",    "mqar_exact_high",    "mqar_effective_length_mean"};
std::string results_csv(const nlohmann::json& results);
// Folds each cell's probe-<task>.json into results: results["probes"], the probe columns of the rows,
// a ranking by retrieval, and what_this_shows's sentences on where loss and retrieval disagree.
void add_probe_results(nlohmann::json& results, const Experiment& experiment, const std::string& out);
// The console table of results["probes"] (empty without probes).
std::string format_probe_results(const nlohmann::json& results);

}  // namespace poslab
