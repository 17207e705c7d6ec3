// Retrieval beside loss in an experiment's results: each cell's probe-<task>.json folded per group and
// length (exact match pooled over depths: the mean over seeds with its 95% interval, and the Wilson
// interval of all trials), the effective length per seed, a ranking by retrieval, and the sentences that
// say where loss and retrieval disagree.
#include <algorithm>
#include <cmath>
#include <set>
#include <map>
#include <tuple>

#include <spdlog/spdlog.h>

#include "config/config.h"
#include "experiment/experiment.h"
#include "experiment/report_stats.h"
#include "probe/options.h"
#include "probe/stats.h"
#include "util/files.h"

namespace poslab {
using nlohmann::json;

namespace {

struct LengthAcc {
  std::vector<double> exact;  // one per seed
  int64_t k = 0, n = 0;       // pooled over seeds and depths
  std::string status;         // the first non-ok status
};

struct GroupAcc {
  std::string item;
  std::string scenario;  // the other grid keys' values, as the loss rows name them ("" with one grid key)
  std::vector<std::string> cells;  // the trained cells' directories, one probe file each
  std::vector<int> effective;  // tokens, as each cell's probe file has it
  std::map<int, LengthAcc> lengths;
};

std::string fmt(double v, const char* f = "%.2f") {
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// What a probe's numbers are, in a few words: "5-digit keys, noise filler, depths pooled".
std::string probe_setting(const std::string& task, const json& p) {
  if (task == "mqar")
    return "distance axis, " + p.value("pairs", json(0)).dump() + " pairs, " + p.value("gaps", std::string("power")) + " gaps";
  return std::to_string(p.value("digits", 0)) + "-digit keys, " + p.value("haystack", std::string()) + " filler, depths pooled";
}

constexpr const char* kProbedAsTrained = "as trained";

// The config a cell trained with: its run's config.json (the experiment's cells carry none under --aggregate).
static json cell_config(const Cell& c, const std::string& out) {
  const std::string saved = out + "/cells/" + c.name + "/config.json";
  return file_exists(saved) ? read_json_file(saved) : c.config;
}

// The rows a cell's probe stands beside, as (group, settings): the cell's own; with an eval grid, those of
// the variants that evaluate the model with the RoPE scaling the probe decoded it with, the cell's own
// eval.rope_scaling (a variant's other eval.rope_scaling changes the model, and the probe did not run with it).
std::vector<std::pair<std::string, json>> probe_units(const Experiment& e, const Cell& c, const std::string& out) {
  if (e.eval_grid.empty()) return {{c.group, c.settings}};
  const json config = cell_config(c, out);
  // The scaling a config evaluates with: "none" for an inactive one, whatever its other keys hold.
  const auto scaling_of = [](const json& cfg) {
    const json r = cfg.is_object() && cfg.contains("eval") ? cfg["eval"].value("rope_scaling", json::object()) : json::object();
    return r.value("kind", json("none")) == "none" ? json("none") : r;
  };
  const json probed = scaling_of(config);
  std::vector<std::pair<std::string, json>> units;
  for (const auto& v : e.eval_grid) {
    json with = config;
    apply_overrides(with, v.overrides);
    if (scaling_of(with) != probed) continue;
    json settings = c.settings;
    settings["eval"] = v.name;
    units.push_back({unit_group(e, c, &v), settings});
  }
  // No variant evaluates with the scaling the probe decoded with (every variant scales, the model was
  // trained without): the probe still stands, in the retrieval table under "as trained", beside no loss row.
  if (units.empty()) {
    json settings = c.settings;
    settings["eval"] = kProbedAsTrained;
    units.push_back({unit_group(e, c, std::string(kProbedAsTrained)), settings});
  }
  return units;
}

// The best mean exact match of a probe's groups at `length` and the group's item; -1 where none scored there.
std::pair<double, std::string> best_exact_at(const json& probe, int length) {
  std::pair<double, std::string> best{-1.0, ""};
  for (const auto& g : probe["groups"])
    for (const auto& l : g["lengths"])
      if (l["length"] == length && l["exact_mean"].is_number() && l["exact_mean"].get<double>() > best.first)
        best = {l["exact_mean"].get<double>(), g["item"].get<std::string>()};
  return best;
}

}  // namespace

void add_probe_results(json& results, const Experiment& e, const std::string& out) {
  // Every row carries every probe column (null without that probe), so results.csv has one header for all.
  for (auto& row : results["rows"])
    for (const char* task : {"passkey", "mqar"})
      for (const char* k : {"_exact_mean", "_exact_ci95", "_exact_low", "_exact_high", "_effective_length_mean"})
        row[std::string(task) + k] = nullptr;
  if (e.probes.empty()) return;
  const std::string item_key = experiment_item_key(e);
  json probes = json::object();
  for (auto task = e.probes.begin(); task != e.probes.end(); ++task) {
    std::vector<std::string> order;
    std::map<std::string, GroupAcc> groups;
    // Variants that evaluate with the same RoPE scaling share one probe: its numbers go beside each of
    // their rows, but the retrieval table and its ranking show it once (the first such variant).
    std::set<std::string> repeats;
    json meta;
    for (const auto& c : e.cells) {
      const std::string path = out + "/cells/" + c.name + "/probe-" + task.key() + ".json";
      if (!file_exists(path)) continue;
      json p;
      try {
        p = read_json_file(path);
      } catch (const ConfigError&) {
        continue;
      }
      if (!p.is_object() || !p.contains("results")) continue;
      // A file written over since by `poslab probe` with other settings (compare probes such a cell again;
      // --aggregate does not): pooled, it would mix two probes in one group. Left out, and said so.
      std::string differs;
      try {
        differs = probe_file_differs(p, probe_options_from_json(task.key(), task.value(), "probes." + task.key()),
                                     config_from_json(cell_config(c, out)));
      } catch (const std::exception&) {
        // Not knowable (a config this build cannot read): pooled as before, compare's own checks name it.
      }
      if (!differs.empty()) {
        spdlog::warn("{}: probed with {}, not as the experiment asks: left out of the results (run compare to probe it again)",
                     path, differs);
        continue;
      }
      if (meta.is_null()) {
        meta = {{"train_length", p["train_length"]}, {"threshold", p["threshold"]}, {"trials", p.value("trials", 0)}};
        for (const char* k : {"template", "digits", "haystack", "pairs", "queries", "gaps"})  // the task's own
          if (p.contains(k)) meta[k] = p[k];
      }
      bool first_unit = true;
      for (const auto& [group, settings] : probe_units(e, c, out)) {
        if (!first_unit) repeats.insert(group);
        first_unit = false;
        if (!groups.count(group)) order.push_back(group);
        auto& g = groups[group];
        g.item = settings.contains(item_key) ? (settings[item_key].is_string() ? settings[item_key].get<std::string>()
                                                                              : settings[item_key].dump())
                                             : group;
        // The training grid's other keys (an eval variant shares the trained cell's probe).
        g.scenario = scenario_text(e, e.group_keys, settings, item_key);
        g.cells.push_back("cells/" + c.name);
        g.effective.push_back(p["effective_length"].get<int>());
        std::map<int, std::pair<int64_t, int64_t>> pooled;  // this seed: length -> (k, n)
        for (const auto& r : p["results"]) {
          const bool counted = r["control"].is_null() || (r["control"] == "no_needle" && !r["depth"].is_null());
          if (!counted || r.value("axis", "distance") != "distance") continue;  // mqar: the distance axis, as its effective length
          const int L = r["length"].get<int>();
          auto& la = g.lengths[L];
          if (r["status"] != "ok") {
            if (la.status.empty()) la.status = r["status"];
            continue;
          }
          const auto n = r["trials"].get<int64_t>();
          const auto k = static_cast<int64_t>(std::llround(r["exact"].get<double>() * static_cast<double>(n)));
          pooled[L].first += k, pooled[L].second += n;
        }
        for (const auto& [L, kn] : pooled) {
          auto& la = g.lengths[L];
          la.exact.push_back(static_cast<double>(kn.first) / static_cast<double>(kn.second));
          la.k += kn.first, la.n += kn.second;
        }
      }
    }
    if (order.empty()) continue;
    json gj = json::array();
    for (const auto& name : order) {
      const auto& g = groups[name];
      json lengths = json::array();
      for (const auto& [L, la] : g.lengths) {
        json st = summarize_values(la.exact);
        const auto [lo, hi] = wilson_interval(la.k, la.n);
        lengths.push_back({{"length", L}, {"status", la.exact.empty() ? (la.status.empty() ? "missing" : la.status) : "ok"},
                           {"exact_mean", st["mean"]}, {"exact_ci95", st["ci95"]}, {"seeds", la.exact.size()},
                           {"trials", la.n}, {"exact_pooled", la.n ? json(static_cast<double>(la.k) / la.n) : json(nullptr)},
                           {"exact_low", la.n ? json(lo) : json(nullptr)}, {"exact_high", la.n ? json(hi) : json(nullptr)}});
      }
      json eff = summarize_values(std::vector<double>(g.effective.begin(), g.effective.end()));
      gj.push_back({{"group", name}, {"item", g.item}, {"cells", g.cells}, {"effective_lengths", g.effective},
                    {"effective_length_mean", eff["mean"]}, {"effective_length_ci95", eff["ci95"]},
                    {"effective_length_min", *std::min_element(g.effective.begin(), g.effective.end())},
                    {"lengths", lengths}});
    }
    json entry = meta;
    entry["groups"] = json::array();
    for (const auto& g : gj)
      if (!repeats.count(g["group"].get<std::string>())) entry["groups"].push_back(g);
    // Ranking by retrieval: the effective length (the smallest over seeds: it must hold for each), then
    // the mean exact match past the training length, then at it (so that, where nothing retrieves past
    // it, the encodings that learned the task at the training length still come first).
    // A group probed at no length past it (a learned table's n/a there) has no retrieval past it to rank by:
    // after those that were probed there, as n/a ranks last in the loss ranking, and null in the file.
    std::vector<std::pair<std::string, std::tuple<double, double, double>>> rank;
    const int train = meta["train_length"].get<int>();
    for (const auto& g : entry["groups"]) {
      double past = 0, at = 0;
      int count = 0;
      for (const auto& l : g["lengths"]) {
        if (!l["exact_mean"].is_number()) continue;  // n/a or missing: not a 0
        const double x = l["exact_mean"].get<double>();
        if (l["length"].get<int>() > train) past += x, ++count;
        if (l["length"].get<int>() == train) at = x;
      }
      // Named by its item, and where other grid keys vary, by its scenario too (as the loss rows: "rope
      // (learning_rate=0.001)"): two scenarios of one encoding are two entries.
      const std::string& scenario = groups[g["group"].get<std::string>()].scenario;
      const std::string name = g["item"].get<std::string>() + (scenario.empty() ? "" : " (" + scenario + ")");
      rank.push_back({name, {g["effective_length_min"].get<double>(), count ? past / count : -1.0, at}});
    }
    std::stable_sort(rank.begin(), rank.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    json rj = json::array();
    for (const auto& [item, v] : rank)
      rj.push_back({{"name", item}, {"effective_length", static_cast<int>(std::get<0>(v))},
                    {"exact_past_train", std::get<1>(v) < 0 ? json(nullptr) : json(std::get<1>(v))},
                    {"exact_at_train", std::get<2>(v)}});
    entry["ranking"] = rj;
    probes[task.key()] = entry;
    // The probe's columns beside loss in the rows of the same group and length.
    for (auto& row : results["rows"])
      for (const auto& g : gj) {
        if (g["group"] != row["group"]) continue;
        row[task.key() + "_effective_length_mean"] = g["effective_length_mean"];
        for (const auto& l : g["lengths"])
          // Probe lengths are tokens: a task row (length in items) matches by its tokens.
          if (l["length"] == (row.contains("tokens") && row["tokens"].is_number() ? row["tokens"] : row["length"])) {
            row[task.key() + "_exact_mean"] = l["exact_mean"];
            row[task.key() + "_exact_ci95"] = l["exact_ci95"];
            row[task.key() + "_exact_low"] = l["exact_low"];
            row[task.key() + "_exact_high"] = l["exact_high"];
          }
      }
  }
  if (probes.empty()) return;
  results["probes"] = probes;
  // Where loss and retrieval disagree, say so: no report crowns an encoding on loss alone.
  if (!results.contains("what_this_shows")) return;
  // mqar alone: its effective lengths beside the task metric.
  if (!probes.contains("passkey")) {
    const auto& mq = probes["mqar"];
    std::string text = "Retrieval (mqar, " + probe_setting("mqar", mq) + "): effective length (lower 95% bound of exact match >= " +
                       fmt(mq["threshold"].get<double>()) + ", every seed) ";
    bool first = true;
    for (const auto& r : mq["ranking"]) {
      const double eff = r["effective_length"].get<double>();
      text += (first ? "" : ", ") + r["name"].get<std::string>() + " " +
              (eff > 0 ? times(eff / mq["train_length"].get<double>()) : "none");
      first = false;
    }
    text += ".";
    // As for the passkey below: an effective length of none says nothing about distance where the task was
    // not learned at the training length itself.
    const int train = mq["train_length"].get<int>();
    const auto [at_train, at_train_name] = best_exact_at(mq, train);
    if (at_train >= 0 && at_train < mq["threshold"].get<double>())
      text += " No encoding answers every query reliably even at the training length (best: " + at_train_name + ", " +
              fmt(at_train) + " of examples at " + std::to_string(train) + " tokens): the models did not learn the task at " +
              "this budget, so the mqar probe says nothing here about the longer context, for or against.";
    results["what_this_shows"] = results["what_this_shows"].get<std::string>() + " " + text;
    return;
  }
  if (results.value("metric", "") != "loss") return;
  const auto& pk = probes["passkey"];
  const int train = pk["train_length"].get<int>();
  int longest = 0;
  for (const auto& r : results["rows"]) longest = std::max(longest, r["length"].get<int>());
  // The loss leader at the longest length, and its retrieval there.
  std::string leader;
  double best = INFINITY;
  bool clear_lead = false;  // marked best (mark_best): lower beyond the noise, not a tie within it
  for (const auto& r : results["rows"])
    if (r["length"] == longest && r["loss_mean"].is_number() && r["loss_mean"].get<double>() < best)
      best = r["loss_mean"].get<double>(), leader = r["item"], clear_lead = r.value("best", false);
  const std::string lead_note = clear_lead ? "" : "; a lead within the noise, a tie with another row";
  std::string text = "Retrieval (passkey, " + probe_setting("passkey", pk) + "): ";
  std::vector<std::string> parts;
  for (const auto& r : pk["ranking"]) {
    const double eff = r["effective_length"].get<double>();
    parts.push_back(r["name"].get<std::string>() + " " + (eff > 0 ? times(eff / train) : "none"));
  }
  text += "effective length (lower 95% bound of exact match >= " + fmt(pk["threshold"].get<double>()) + ", every seed) ";
  for (size_t i = 0; i < parts.size(); ++i) text += (i ? ", " : "") + parts[i];
  text += ".";
  // Retrieval past the training length means something only where it works at the training length.
  const auto [at_train, at_train_name] = best_exact_at(pk, train);
  if (at_train >= 0 && at_train < pk["threshold"].get<double>()) {
    // Pooled over seeds it failed; at this scale single seeds often learn the format outright while
    // others do not (docs/reproductions.md), and a reader should see which did.
    std::string some;
    for (const auto& g : pk["groups"]) {
      const auto& eff = g["effective_lengths"];
      const auto learned = std::count_if(eff.begin(), eff.end(), [&](const json& e) { return e.get<double>() >= train; });
      if (learned > 0)
        some += (some.empty() ? "" : ", ") + g["item"].get<std::string>() + " " + std::to_string(learned) + " of " +
                std::to_string(eff.size());
    }
    results["what_this_shows"] =
        results["what_this_shows"].get<std::string>() + " " + text + " No encoding retrieves the key reliably even at the " +
        "training length (best: " + at_train_name + ", " + fmt(at_train) + " of trials at " + std::to_string(train) +
        " tokens): " +
        (some.empty() ? "the models did not learn the probe's format at this budget, so retrieval says nothing here about "
                        "the longer context, for or against (more steps, a larger model or more passkey documents may teach it)."
                      : "the models did not learn the probe's format in every seed at this budget (seeds with an effective "
                        "length of at least 1x: " + some + "), so pooled over seeds retrieval says little here about the "
                        "longer context (more steps, a larger model or more passkey documents may teach it in every seed).");
    return;
  }
  for (const auto& g : pk["groups"]) {
    if (g["item"] != leader) continue;
    for (const auto& l : g["lengths"]) {
      if (l["length"] != longest || !l["exact_mean"].is_number()) continue;
      const double x = l["exact_mean"].get<double>();
      if (x < pk["threshold"].get<double>())
        text += " Loss and retrieval disagree: " + leader + " has the lowest" + (clear_lead ? "" : " mean") + " loss at " +
                std::to_string(longest) + " tokens (" + times(static_cast<double>(longest) / train) + lead_note +
                "), yet retrieves the key there in " + fmt(x) +
                " of trials [" + fmt(l["exact_low"].get<double>()) + ", " + fmt(l["exact_high"].get<double>()) +
                "]: its flat loss is not evidence that it uses the longer context.";
      else
        text += " Loss and retrieval agree at " + std::to_string(longest) + " tokens: " + leader + ", lowest in" +
                (clear_lead ? "" : " mean") + " loss there" + (clear_lead ? "" : " (" + lead_note.substr(2) + ")") +
                ", also retrieves the key in " + fmt(x) + " of trials.";
    }
  }
  results["what_this_shows"] = results["what_this_shows"].get<std::string>() + " " + text;
}

}  // namespace poslab

namespace poslab {

std::string format_probe_results(const json& results) {
  if (!results.contains("probes")) return "";
  std::string out;
  for (auto task = results["probes"].begin(); task != results["probes"].end(); ++task) {
    const auto& p = task.value();
    std::vector<int> lengths;
    for (const auto& g : p["groups"])
      for (const auto& l : g["lengths"])
        if (std::find(lengths.begin(), lengths.end(), l["length"].get<int>()) == lengths.end()) lengths.push_back(l["length"]);
    std::sort(lengths.begin(), lengths.end());
    char buf[128];
    out += task.key() + " retrieval: exact match by length (tokens; trained at " + p["train_length"].dump() + "; " +
           probe_setting(task.key(), p) + ", [95% Wilson interval over all trials])\n";
    std::snprintf(buf, sizeof buf, "%-18s", group_label(results).c_str());
    out += buf;
    for (int L : lengths) std::snprintf(buf, sizeof buf, " %17d", L), out += buf;
    out += "  effective length\n";
    for (const auto& g : p["groups"]) {
      std::snprintf(buf, sizeof buf, "%-18s", g["group"].get<std::string>().c_str());
      out += buf;
      for (int L : lengths) {
        std::string cell = "-";
        for (const auto& l : g["lengths"])
          if (l["length"] == L) {
            if (l["exact_mean"].is_number()) {
              std::snprintf(buf, sizeof buf, "%.2f [%.2f,%.2f]", l["exact_mean"].get<double>(), l["exact_low"].get<double>(),
                            l["exact_high"].get<double>());
              cell = buf;
            } else if (l["status"].get<std::string>().rfind("n/a", 0) == 0) {
              cell = "n/a";
            }
          }
        std::snprintf(buf, sizeof buf, " %17s", cell.c_str());
        out += buf;
      }
      // As report.md writes it: "64 (1x)", "96 (1.5x)", "0 (none)".
      const double eff = g["effective_length_min"].get<double>();
      if (eff > 0) std::snprintf(buf, sizeof buf, "  %.0f (%gx)\n", eff, eff / p["train_length"].get<double>());
      else std::snprintf(buf, sizeof buf, "  %.0f (none)\n", eff);
      out += buf;
    }
    out += "ranking by retrieval (effective length, then exact match past the training length, then at it):";
    for (const auto& r : p["ranking"]) out += " " + r["name"].get<std::string>();
    out += "\n";
  }
  return out;
}

}  // namespace poslab
