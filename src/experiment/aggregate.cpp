// Aggregation: the cells' eval.json and summary.json folded into rows of mean and standard
// deviation over seeds, one row per group x eval length; plus the console table and CSV.
#include <cmath>
#include <map>
#include <sstream>

#include "config/config.h"
#include "experiment/experiment.h"
#include "train/run_dir.h"
#include "util/files.h"

namespace poslab {
using nlohmann::json;

namespace {

struct Stats {
  std::vector<double> values;
  json mean() const {
    if (values.empty()) return nullptr;
    double s = 0;
    for (double v : values) s += v;
    return s / values.size();
  }
  json stddev() const {  // population std over seeds; 0 for a single seed
    if (values.empty()) return nullptr;
    const double m = mean().get<double>();
    double s = 0;
    for (double v : values) s += (v - m) * (v - m);
    return std::sqrt(s / values.size());
  }
};

json read_or_null(const std::string& path) {
  if (!file_exists(path)) return nullptr;
  try {
    return read_json_file(path);
  } catch (const ConfigError&) {
    return nullptr;
  }
}

}  // namespace

json aggregate_results(const Experiment& e, const std::string& out) {
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
  json first_eval;
  for (const auto& c : e.cells) {
    const std::string rel = "cells/" + c.name;
    RunPaths paths{out + "/" + rel};
    json summary = read_or_null(paths.summary()), eval = read_or_null(paths.eval());
    json cell = {{"name", c.name}, {"dir", rel}, {"group", c.group}, {"settings", c.settings}};
    cell["status"] = !c.error.empty() ? "failed" : summary.is_object() ? summary.value("status", "unknown") : "not run";
    cell["error"] = !c.error.empty() ? json(c.error) : summary.is_object() && summary.contains("error") ? summary["error"] : json(nullptr);
    for (const char* k : {"params", "tokens_per_s", "wall_s", "final_val_loss"})
      cell[k] = summary.is_object() && summary.contains(k) ? summary[k] : json(nullptr);
    cells.push_back(cell);
    if (std::find(groups.begin(), groups.end(), c.group) == groups.end()) groups.push_back(c.group);
    if (!eval.is_object() || cell["status"] != "done") continue;
    if (first_eval.is_null()) first_eval = eval;
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
  std::sort(lengths.begin(), lengths.end());
  json rows = json::array();
  for (const auto& g : groups)
    for (int L : lengths) {
      auto it = acc.find({g, L});
      if (it == acc.end()) continue;
      const auto& a = it->second;
      json row = {{"group", g}, {"length", L}, {"tokens", a.tokens}, {"n", a.n},
                  {"status", !a.status.empty() ? a.status : a.n ? "ok" : "missing"}};
      for (const char* k : {"loss", "ppl", "token_acc", "exact_match"}) {
        auto m = a.metric.find(k);
        const bool have = a.status.empty() && m != a.metric.end();
        row[std::string(k) + "_mean"] = have ? m->second.mean() : json(nullptr);
        row[std::string(k) + "_std"] = have ? m->second.stddev() : json(nullptr);
      }
      row["params"] = params[g].mean();
      row["tokens_per_s_mean"] = speed[g].mean();
      row["wall_s_mean"] = wall[g].mean();
      rows.push_back(row);
    }
  json results = {{"experiment", e.name}, {"config", e.path}, {"description", e.description},
                  {"grid", e.grid},       {"group_keys", e.group_keys}, {"lengths", lengths},
                  {"cells", cells},       {"rows", rows}};
  if (first_eval.is_object()) {
    bool exact = false;
    for (const auto& r : rows) exact |= r["exact_match_mean"].is_number();
    results["metric"] = exact ? "exact_match" : "loss";
    results["length_unit"] = first_eval["length_unit"];
    results["train_length"] = first_eval["train_length"];
    results["train_tokens"] = nullptr;
    for (const auto& r : first_eval["results"])
      if (r["length"] == first_eval["train_length"]) results["train_tokens"] = r["tokens"];
  }
  return results;
}

std::string format_results_table(const json& results) {
  if (!results.contains("metric")) return "no finished cells to tabulate\n";
  const bool exact = results["metric"] == "exact_match";
  const auto& lengths = results["lengths"];
  const std::string metric = exact ? "exact_match" : "loss";
  // Best per length column: highest exact match, or lowest loss; unmarked when all values tie.
  std::map<int, double> best, worst;
  for (const auto& r : results["rows"]) {
    const auto& v = r[metric + "_mean"];
    if (!v.is_number()) continue;
    const int L = r["length"];
    const double x = v.get<double>();
    if (!best.count(L) || (exact ? x > best[L] : x < best[L])) best[L] = x;
    if (!worst.count(L) || (exact ? x < worst[L] : x > worst[L])) worst[L] = x;
  }
  std::ostringstream out;
  out << results["experiment"].get<std::string>() << ": " << (exact ? "exact match" : "loss") << " by eval length ("
      << results["length_unit"].get<std::string>() << "; trained up to " << results["train_length"]
      << "), mean over seeds, * = best in column\n";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%-18s", "encoding");
  out << buf;
  for (const auto& L : lengths) std::snprintf(buf, sizeof buf, " %9d", L.get<int>()), out << buf;
  out << "  " << "   params    tok/s\n";
  std::vector<std::string> groups;
  for (const auto& r : results["rows"])
    if (std::find(groups.begin(), groups.end(), r["group"]) == groups.end()) groups.push_back(r["group"]);
  for (const auto& g : groups) {
    std::snprintf(buf, sizeof buf, "%-18s", g.c_str());
    out << buf;
    json last;
    for (const auto& L : lengths) {
      std::string cell = "-";
      for (const auto& r : results["rows"])
        if (r["group"] == g && r["length"] == L) {
          last = r;
          const auto& v = r[metric + "_mean"];
          if (v.is_number()) {
            std::snprintf(buf, sizeof buf, exact ? "%.3f" : "%.4f", v.get<double>());
            const int l = L.get<int>();
            const bool marked = best[l] != worst[l] && std::abs(v.get<double>() - best[l]) < 1e-12;
            cell = std::string(buf) + (marked ? "*" : " ");
          } else if (r["status"].get<std::string>().rfind("n/a", 0) == 0) {
            cell = "n/a ";
          }
        }
      std::snprintf(buf, sizeof buf, " %9s", cell.c_str());
      out << buf;
    }
    if (last.is_object() && last["params"].is_number())
      std::snprintf(buf, sizeof buf, "  %9.0f %8.0f", last["params"].get<double>(), last["tokens_per_s_mean"].get<double>()),
          out << buf;
    out << "\n";
  }
  int failed = 0;
  for (const auto& c : results["cells"]) failed += c["status"] == "failed";
  if (failed) out << failed << " cell(s) failed; see results.json for their errors\n";
  return out.str();
}

std::string results_csv(const json& results) {
  std::ostringstream out;
  out << "group,length,tokens,n,status,loss_mean,loss_std,ppl_mean,token_acc_mean,token_acc_std,exact_match_mean,"
         "exact_match_std,params,tokens_per_s_mean,wall_s_mean\n";
  auto field = [](const json& v) {
    if (v.is_null()) return std::string();
    if (v.is_string()) return "\"" + v.get<std::string>() + "\"";
    return v.dump();
  };
  for (const auto& r : results["rows"]) {
    bool first = true;
    for (const char* k : {"group", "length", "tokens", "n", "status", "loss_mean", "loss_std", "ppl_mean", "token_acc_mean",
                          "token_acc_std", "exact_match_mean", "exact_match_std", "params", "tokens_per_s_mean", "wall_s_mean"}) {
      out << (first ? "" : ",") << field(r[k]);
      first = false;
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace poslab
