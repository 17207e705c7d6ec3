// Aggregation: the cells' eval.json and summary.json folded into rows of mean and standard
// deviation over seeds, one row per group x eval length; plus the console table and CSV.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "config/config.h"
#include "experiment/experiment.h"
#include "experiment/report_stats.h"
#include "train/run_dir.h"
#include "util/csv.h"
#include "util/files.h"
#include "util/gpu_info.h"
#include "util/runtime.h"

namespace poslab {
using nlohmann::json;

namespace {

struct Stats {
  std::vector<double> values;
  json mean() const { return summarize_values(values)["mean"]; }
};

// Which machines trained the cells: one entry per (device, precision, CPU, GPU) with its count of cells, in the
// order first met. Results differ by machine (bf16 or fp32, other kernels), so the report names them all.
static json machines_of(const json& cells) {
  json machines = json::array();
  std::set<std::string> dirs;  // a cell evaluated several ways (an eval grid) trained once
  for (const auto& c : cells) {
    if (c["device"].is_null() && c["precision"].is_null() && c["cpu"].is_null()) continue;  // not trained
    if (!dirs.insert(c["dir"].get<std::string>()).second) continue;
    auto same = std::find_if(machines.begin(), machines.end(), [&](const json& m) {
      return m["device"] == c["device"] && m["precision"] == c["precision"] && m["cpu"] == c["cpu"] && m["gpu"] == c["gpu"];
    });
    if (same == machines.end())
      machines.push_back(
          {{"device", c["device"]}, {"precision", c["precision"]}, {"cpu", c["cpu"]}, {"gpu", c["gpu"]}, {"cells", 1}});
    else
      (*same)["cells"] = (*same)["cells"].get<int>() + 1;
  }
  return machines;
}

// A cell's summary.json or eval.json: absent, null (not run yet, or not evaluated); present, it must parse and
// hold what is read from it, or the cell would drop out of its row's mean without a word. `fix` says how to
// write the file again.
json read_cell_file(const std::string& path, const std::vector<std::string>& keys, const std::string& fix) {
  if (!file_exists(path)) return nullptr;
  json j;
  try {
    j = read_json_file(path);
  } catch (const ConfigError& e) {
    throw ConfigError(std::string(e.what()) + " (" + fix + ")");
  }
  for (const auto& k : keys)
    if (!j.is_object() || !j.contains(k)) throw ConfigError(path + ": no \"" + k + "\" in it (" + fix + ")");
  return j;
}

}  // namespace

std::string experiment_item_key(const Experiment& e) {
  // The encoding when it varies; else the evaluation variant; else the first grid key.
  const auto kinds = e.grid.find("model.pos_encoding.kind");
  if (kinds != e.grid.end() && (kinds->size() > 1 || e.eval_grid.empty())) return "model.pos_encoding.kind";
  if (!e.eval_grid.empty()) return "eval";
  return e.group_keys.empty() ? "" : e.group_keys[0];
}

bool one_training_group(const Experiment& e) {
  for (const auto& other : e.cells)
    if (other.group != e.cells[0].group) return false;
  return true;
}

std::string unit_group(const Experiment& e, const Cell& c, const EvalVariant* variant) {
  return unit_group(e, c, variant ? variant->name : std::string());
}

std::string unit_group(const Experiment& e, const Cell& c, const std::string& variant) {
  if (variant.empty()) return c.group;
  return one_training_group(e) ? variant : c.group + ", eval=" + variant;
}

std::string group_label(const json& results) {
  const std::vector<std::string> keys = results.value("group_keys", std::vector<std::string>{});
  return keys == std::vector<std::string>{"model.pos_encoding.kind"} ? "encoding"
         : keys == std::vector<std::string>{"eval"}                  ? "evaluation"
                                                                     : "group";
}

json aggregate_results(const Experiment& e, const std::string& out, const std::map<std::string, std::string>& failures) {
  json cells = json::array();
  std::vector<std::string> groups;
  std::vector<int> lengths;
  struct Acc {
    std::map<std::string, Stats> metric;
    std::string status;
    int64_t tokens = 0;
    int n = 0;
  };
  std::map<std::pair<std::string, int>, Acc> acc;
  std::map<std::string, Stats> params, speed, wall;
  std::map<std::string, json> group_settings;
  std::set<std::string> failed_groups;  // groups with a failed cell: a row no cell reached says "failed"
  json first_eval;
  // Every finished cell's training length, and its model input tokens at that length: cells of a grid over
  // block_size or over tasks differ, and no single cell speaks for the others.
  std::map<int, std::set<int64_t>> trained;
  const std::string item_key = experiment_item_key(e);
  // With an eval grid over one trained group, the variant alone names a row ("linear"), and the header
  // says so ("evaluation"): "kind, eval" above "none" read as the encoding NoPE.
  std::vector<std::string> group_keys = e.group_keys;
  if (!e.eval_grid.empty()) {
    if (one_training_group(e)) group_keys.clear();
    group_keys.push_back("eval");
  }
  // With an eval grid, each (cell, variant) is a unit of its own; otherwise each cell with its eval.json.
  std::vector<std::pair<const Cell*, const EvalVariant*>> units;
  for (const auto& c : e.cells) {
    if (e.eval_grid.empty()) units.push_back({&c, nullptr});
    for (const auto& v : e.eval_grid) units.push_back({&c, &v});
  }
  for (const auto& [cp, variant] : units) {
    Cell c = *cp;
    if (variant) {
      c.group = unit_group(e, *cp, variant);
      c.settings["eval"] = variant->name;
    }
    if (!group_settings.count(c.group)) group_settings[c.group] = c.settings;
    const std::string rel = "cells/" + c.name;
    RunPaths paths{out + "/" + rel};
    const std::string retrain = "delete " + paths.dir + " and run the compare again to retrain it";
    const std::string eval_path = paths.eval(variant ? variant->name : "");
    json summary = read_cell_file(paths.summary(), {"status"}, retrain);
    json eval = read_cell_file(eval_path, {"train_length", "results"},
                               "delete it and run the compare again: a trained cell is only evaluated again");
    if (summary.is_object() && summary["status"] == "done")
      for (const char* k : {"params", "tokens_per_s", "wall_s"})
        if (!summary.contains(k) || !summary[k].is_number())
          throw ConfigError(paths.summary() + ": \"" + std::string(k) + "\" is not a number in a finished run's summary (" +
                            retrain + ")");
    if (eval.is_object() && !eval["results"].is_array()) throw ConfigError(eval_path + ": \"results\" is not a list");
    json cell = {{"name", c.name + (variant ? "@" + variant->name : "")}, {"dir", rel}, {"group", c.group},
                 {"settings", c.settings}};
    if (variant && summary.is_object() && !eval.is_object() && summary.value("status", "") == "done")
      summary["status"] = "not evaluated";
    // Its error: refused before training (c.error), failed in this compare (a variant's own failure, else the
    // training's), or as its summary records it.
    std::string error = c.error;
    for (const std::string& key : {cell["name"].get<std::string>(), cp->name})
      if (error.empty() && failures.count(key)) error = failures.at(key);
    cell["status"] = !error.empty() ? "failed" : summary.is_object() ? summary.value("status", "unknown") : "not run";
    cell["error"] = !error.empty() ? json(error) : summary.is_object() && summary.contains("error") ? summary["error"] : json(nullptr);
    for (const char* k : {"params", "tokens_per_s", "wall_s", "threads", "core_share", "final_val_loss", "device", "precision"})
      cell[k] = summary.is_object() && summary.contains(k) ? summary[k] : json(nullptr);
    // The CPU and GPU that trained it (runs written before summary.json recorded them have neither).
    cell["cpu"] = summary.is_object() && summary["cpu"].is_object() ? json(describe_cpu(summary["cpu"])) : json(nullptr);
    cell["gpu"] = summary.is_object() && summary["gpu"].is_object() ? json(describe_gpu(summary["gpu"])) : json(nullptr);
    cells.push_back(cell);
    if (cell["status"] == "failed") failed_groups.insert(c.group);
    if (std::find(groups.begin(), groups.end(), c.group) == groups.end()) groups.push_back(c.group);
    if (!eval.is_object() || cell["status"] != "done") continue;
    if (first_eval.is_null()) first_eval = eval;
    const int train_length = eval.value("train_length", 0);
    auto& tokens_at_train = trained[train_length];
    for (const auto& r : eval["results"])
      if (r["length"] == train_length && r["tokens"].is_number()) tokens_at_train.insert(r["tokens"].get<int64_t>());
    params[c.group].values.push_back(summary["params"].get<double>());
    speed[c.group].values.push_back(summary["tokens_per_s"].get<double>());
    wall[c.group].values.push_back(summary["wall_s"].get<double>());
    for (const auto& r : eval["results"]) {
      const int L = r["length"].get<int>();
      if (std::find(lengths.begin(), lengths.end(), L) == lengths.end()) lengths.push_back(L);
      auto& a = acc[{c.group, L}];
      a.tokens = r["tokens"].get<int64_t>();
      if (r["status"] != "ok") {
        a.status = r["status"];
        continue;
      }
      ++a.n;
      for (const char* k : {"loss", "ppl", "token_acc", "exact_match"})
        if (r[k].is_number()) a.metric[k].values.push_back(r[k].get<double>());
    }
  }
  // No cell evaluated (all failed, or none run yet): the lengths the cells would have been evaluated at, so
  // that every group still has its rows, each saying why it is empty.
  if (lengths.empty())
    for (const auto& c : e.cells)
      if (c.config.is_object() && c.config.contains("eval") && c.config["eval"]["lengths"].is_array())
        for (const auto& L : c.config["eval"]["lengths"])
          if (L.is_number_integer() && std::find(lengths.begin(), lengths.end(), L.get<int>()) == lengths.end())
            lengths.push_back(L.get<int>());
  std::sort(lengths.begin(), lengths.end());
  json rows = json::array();
  std::set<std::string> scenario_keys;  // the keys a scenario names, as written in it (values may hold ", ")
  for (const auto& g : groups)
    for (int L : lengths) {
      // Every group at every length, a row no cell reached too (all its cells failed or not run yet), as the
      // report's tables show it: results.csv then has a line for each.
      auto it = acc.find({g, L});
      const Acc none{{}, failed_groups.count(g) ? "failed" : "", 0, 0};
      const auto& a = it != acc.end() ? it->second : none;
      json row = {{"group", g}, {"length", L}, {"tokens", it != acc.end() ? json(a.tokens) : json(nullptr)}, {"n", a.n},
                  {"status", !a.status.empty() ? a.status : a.n ? "ok" : "missing"}};
      const json& settings = group_settings[g];
      row["item"] = settings.contains(item_key) ? grid_value_text(settings[item_key]) : g;
      row["scenario"] = scenario_text(e, group_keys, settings, item_key, &scenario_keys);
      for (const char* k : {"loss", "ppl", "token_acc", "exact_match"}) {
        auto m = a.metric.find(k);
        const bool have = a.status.empty() && m != a.metric.end();
        json st = summarize_values(have ? m->second.values : std::vector<double>{});
        row[std::string(k) + "_mean"] = st["mean"];
        row[std::string(k) + "_std"] = st["std"];
        row[std::string(k) + "_ci95"] = st["ci95"];
      }
      // A count: one integer where the group's cells agree (they share the model), as summary.json has it.
      const auto& pv = params[g].values;
      const bool one_count = !pv.empty() && std::all_of(pv.begin(), pv.end(), [&](double v) { return v == pv[0]; });
      row["params"] = one_count ? json(static_cast<int64_t>(pv[0])) : json(params[g].mean());
      row["tokens_per_s_mean"] = speed[g].mean();
      row["wall_s_mean"] = wall[g].mean();
      rows.push_back(row);
    }
  json results = {{"experiment", e.name}, {"config", e.path}, {"description", e.description},
                  {"grid", e.grid},       {"group_keys", group_keys}, {"lengths", lengths},
                  {"cells", cells},       {"rows", rows},             {"scenario_keys", scenario_keys},
                  {"machines", machines_of(cells)}};
  if (!e.eval_grid.empty()) {
    json variants = json::object();
    for (const auto& v : e.eval_grid) variants[v.name] = v.overrides;
    results["eval_grid"] = variants;
  }
  if (first_eval.is_object()) {
    bool exact = false;
    for (const auto& r : rows) exact |= r["exact_match_mean"].is_number();
    results["metric"] = exact ? "exact_match" : "loss";
    results["length_unit"] = first_eval["length_unit"];
    // Past the training length means past every cell's: the longest, whatever the grid's order.
    const int longest_trained = trained.rbegin()->first;
    results["train_length"] = longest_trained;
    results["train_lengths"] = json::array();
    for (const auto& [L, tokens] : trained) results["train_lengths"].push_back(L);
    // Tokens at it only where every cell trained at it has the same count (tasks' items differ in tokens).
    const auto& tokens = trained.rbegin()->second;
    results["train_tokens"] = tokens.size() == 1 ? json(*tokens.begin()) : json(nullptr);
    const std::string metric = results["metric"];
    int seeds = 0;
    for (const auto& r : results["rows"]) seeds = std::max(seeds, r["n"].get<int>());
    results["seeds"] = seeds;
    mark_best(results["rows"], metric, item_key);
    results["ranking"] = ranking_with_fallback(results, metric, item_key);
    results["what_this_shows"] = what_this_shows(results, metric, results["ranking"]);
  }
  add_probe_results(results, e, out);
  return results;
}

std::string format_results_table(const json& results) {
  if (!results.contains("metric")) return "no finished cells to tabulate\n";
  const std::string metric = results["metric"];
  const bool exact = metric == "exact_match";
  const int seeds = results.value("seeds", 1);
  const auto& lengths = results["lengths"];
  std::ostringstream out;
  out << results["experiment"].get<std::string>() << ": " << (exact ? "exact match" : "loss") << " by eval length ("
      << results["length_unit"].get<std::string>() << "; trained "
      << (results.value("train_lengths", json::array()).size() > 1 ? "at " + results["train_lengths"].dump()
                                                                    : "up to " + results["train_length"].dump())
      << "), "
      << (seeds <= 1 ? "1 seed, * = best by more than " + std::to_string(kSingleSeedResolution).substr(0, 4)
                     : "mean ± 95% interval over " + std::to_string(seeds) + " seeds, * = best beyond the intervals")
      << "\n";
  const int width = seeds > 1 ? 15 : 9;
  std::vector<std::string> groups;
  for (const auto& r : results["rows"])
    if (std::find(groups.begin(), groups.end(), r["group"]) == groups.end()) groups.push_back(r["group"]);
  // The first column fits the longest label (UTF-8 counted in code points, as the terminal shows them).
  auto columns = [](const std::string& s) {
    int n = 0;
    for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
    return n;
  };
  const std::string label = group_label(results);
  int label_width = std::max(17, columns(label));
  for (const auto& g : groups) label_width = std::max(label_width, columns(g));
  auto padded = [&](const std::string& s) { return s + std::string(label_width + 1 - columns(s), ' '); };
  char buf[96];
  out << padded(label);
  for (const auto& L : lengths) std::snprintf(buf, sizeof buf, " %*d", width, L.get<int>()), out << buf;
  out << "     params    tok/s\n";
  for (const auto& g : groups) {
    out << padded(g);
    json last;
    for (const auto& L : lengths) {
      std::string cell = "-";
      for (const auto& r : results["rows"])
        if (r["group"] == g && r["length"] == L) {
          last = r;
          const auto& v = r[metric + "_mean"];
          const auto& ci = r[metric + "_ci95"];
          if (v.is_number()) {
            std::snprintf(buf, sizeof buf, "%.3f", v.get<double>());  // the report's precision, at which ranks tie
            cell = buf;
            if (ci.is_number()) std::snprintf(buf, sizeof buf, exact ? "±%.3f" : "±%.3f", ci.get<double>()), cell += buf;
            cell += r.value("best", false) ? "*" : " ";
          } else if (r["status"].get<std::string>().rfind("n/a", 0) == 0) {
            cell = "n/a ";
          }
        }
      // "±" is two bytes in UTF-8 but one column on screen.
      const int pad = width + static_cast<int>(cell.find("±") != std::string::npos);
      std::snprintf(buf, sizeof buf, " %*s", pad, cell.c_str());
      out << buf;
    }
    if (last.is_object() && last["params"].is_number())
      std::snprintf(buf, sizeof buf, "  %9.0f %8.0f", last["params"].get<double>(), last["tokens_per_s_mean"].get<double>()),
          out << buf;
    out << "\n";
  }
  if (results.contains("ranking") && !results["ranking"]["items"].empty()) {
    const auto& rk = results["ranking"];
    // A scenario is one column ranked: a length, or a length under one setting of the other grid keys.
    const size_t n_settings = rk.value("settings", size_t{1});
    // With nothing else varied a scenario is a length: say lengths, not "scenarios", which the best marks use
    // for the rows sharing the other grid keys' values.
    out << "ranking by mean reciprocal rank" << (rk.contains("fallback") ? " of loss" : "") << " over ";
    if (n_settings > 1) out << rk["scenarios"] << " scenarios (" << n_settings << " settings x lengths";
    else out << "lengths";
    for (const auto& L : rk["lengths"]) out << " " << L;
    out << (n_settings > 1 ? "):" : ":");
    for (const auto& it : rk["items"])
      if (it["mrr"].is_number()) std::snprintf(buf, sizeof buf, " %s %.2f", it["name"].get<std::string>().c_str(),
                                               it["mrr"].get<double>()), out << buf;
    out << "\n";
    if (rk.contains("fallback")) out << "(" << rk["fallback"].get<std::string>() << ")\n";
  }
  out << format_probe_results(results);
  if (results.contains("what_this_shows")) out << "What this shows: " << results["what_this_shows"].get<std::string>() << "\n";
  int failed = 0;
  for (const auto& c : results["cells"]) failed += c["status"] == "failed";
  if (failed) out << failed << " cell(s) failed; see results.json for their errors\n";
  return out.str();
}

std::string results_csv(const json& results) {
  std::string out = csv_record(std::vector<std::string>(kResultsCsvFields.begin(), kResultsCsvFields.end()));
  for (const auto& r : results["rows"]) {
    std::vector<std::string> fields;
    for (const auto& k : kResultsCsvFields) fields.push_back(csv_field(r.contains(k) ? r[k] : json()));
    out += csv_record(fields);
  }
  return out;
}

}  // namespace poslab
