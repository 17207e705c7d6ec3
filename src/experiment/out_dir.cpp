// compare's output directory checked before any cell runs: finished cells hold this experiment's configs,
// a shard's directory holds one experiment, and files of an earlier definition of an evaluation variant
// or probe, or that another command wrote over a cell's, are removed to be done again.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "eval/evaluator.h"
#include "experiment/runner_parts.h"
#include "probe/probe.h"

namespace poslab::runner_parts {
using nlohmann::json;

// Where a cell's saved run config and the experiment's differ: "" when they do not, else the first key as a
// config names it (eval.lengths), "KEY is X there, Y in the experiment". The thread count is compare's own
// choice (-j) and the vocabulary size comes from the data: neither counts; nor, with `eval_too` false, eval.*.
static std::string cell_config_difference(Config saved, const Config& want, bool eval_too) {
  saved.model.vocab_size = want.model.vocab_size;
  saved.train.threads = want.train.threads;
  if (!eval_too) saved.eval = want.eval;
  return first_config_difference(config_to_json(saved), config_to_json(want), "there", "in the experiment");
}

// A cell directory that holds a run (finished or to resume) must hold this cell's config: an experiment file
// edited between two runs into the same --out would otherwise mix old cells into new results. Its eval.*
// keys aside: they do not change what trains (adopt_eval_settings takes the experiment's).
// Its data files too, as the cell's run recorded them (data_files.json): a cell to resume, or to evaluate again,
// on files changed since would mix other tokens into the grid's results; refused here, before any cell's file
// is touched (a finished cell's training file is not read again, its validation file may be).
void check_cells_match(const Experiment& e, const CompareOptions& o) {
  std::map<std::string, json> identities;  // the cells share their files: each is read once
  for (const auto& c : e.cells) {
    const std::string dir = cell_dir(o.out, c);
    if (!c.error.empty() || !is_run_dir(dir)) continue;
    const std::string difference =
        cell_config_difference(RunPaths{dir}.read_config(), config_from_json(c.config), /*eval_too=*/false);
    if (!difference.empty())
      throw ConfigError("--out " + o.out + ": cell " + c.name + " holds a run of another config (" + difference +
                        "); use another --out, or remove " + dir + " to train it again");
    const bool trained = cell_status(dir) == "done";
    check_data_files(RunPaths{dir}, trained ? std::vector<std::string>{"val", "text"} : std::vector<std::string>{"train", "val", "text"},
                     "--out " + o.out + ": cell " + c.name,
                     trained ? "its evaluations would be of other tokens than its validation split; put the file back, "
                               "or use another --out"
                             : "resuming it would go on with other tokens; put the file back, or remove " + dir +
                                   " to train it again",
                     &identities);
  }
}

// A cell trained under other eval.* settings (a length added to the experiment's eval.lengths, another
// batch size): training never read them, so the run takes the experiment's into its config.json and is
// evaluated again (its eval.json, of the old settings, goes in drop_foreign_cell_files), not trained again.
std::set<std::string> adopt_eval_settings(const Experiment& e, const CompareOptions& o) {
  std::set<std::string> adopted;
  for (const auto& c : e.cells) {
    const std::string dir = cell_dir(o.out, c);
    if (!c.error.empty() || !is_run_dir(dir)) continue;
    Config saved = RunPaths{dir}.read_config();
    const Config want = config_from_json(c.config);
    const std::string difference = cell_config_difference(saved, want, /*eval_too=*/true);
    if (difference.empty()) continue;
    saved.eval = want.eval;
    write_file_atomic(RunPaths{dir}.config(), config_to_json(saved).dump(2) + "\n");
    spdlog::info("{}: trained with other evaluation settings ({}): it takes the experiment's and is evaluated again, "
                 "not trained again", c.name, difference);
    adopted.insert(c.name);
  }
  return adopted;
}

// Where OUT/experiment.json, as saved, and this experiment (`full`) differ: "" when they are one experiment
// (its file's path and description aside: a copy of the file elsewhere is the same experiment), else the first
// differing key as "KEY: SAVED there, MINE here"; where it is a cell's config digest, the cell and the config
// key, from the config the other shard wrote for that cell (OUT/configs).
static std::string experiment_difference(const json& saved, const json& mine, const Experiment& full,
                                         const CompareOptions& o) {
  json a = saved, b = mine;
  for (json* j : {&a, &b}) j->erase("path"), j->erase("description");
  // Saved by a poslab that kept no digests: the cells' names and settings are what can be compared.
  if (a.contains("cells") && b.contains("cells") && !a["cells"].empty() && !a["cells"][0].contains("config_sha256"))
    for (auto& c : b["cells"]) c.erase("config_sha256");
  const auto diff = json::diff(a, b);
  if (diff.empty()) return "";
  const std::string path = diff[0]["path"].get<std::string>();
  const json::json_pointer at(path);
  if (!at.empty() && at.back() == "config_sha256" && at.parent_pointer().parent_pointer().to_string() == "/cells") {
    const size_t n = std::stoul(at.parent_pointer().back());
    if (n < full.cells.size()) {
      const Cell& c = full.cells[n];
      const std::string theirs = o.out + "/configs/" + c.name + ".json";
      std::string key;
      try {
        if (file_exists(theirs))
          key = cell_config_difference(config_from_json(read_json_file(theirs)), config_from_json(c.config), /*eval_too=*/true);
      } catch (const std::exception&) {
        // unreadable: the digest says it
      }
      return "cell " + c.name + ": " + (key.empty() ? "its config differs" : key);
    }
  }
  return path + ": " + (a.contains(at) ? a.at(at).dump() : "unset") + " there, " + (b.contains(at) ? b.at(at).dump() : "unset") +
         " here";
}

// A shard's output directory is shared with the experiment's other shards: they must all run one
// experiment, from one file, or aggregating them would average cells of different configs as seeds.
void check_same_experiment(const json& mine, const Experiment& full, const CompareOptions& o, bool at_end) {
  const std::string saved_path = o.out + "/experiment.json";
  if (!file_exists(saved_path)) return;
  const std::string difference = experiment_difference(read_json_file(saved_path), mine, full, o);
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
void drop_stale_follow_ups(const Experiment& full, const CompareOptions& o) {
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
void drop_foreign_cell_files(const Experiment& full, const CompareOptions& o, const std::set<std::string>& adopted) {
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
      if (adopted.count(c.name)) spdlog::info("{}: evaluated with {}, the experiment's earlier settings: evaluated again", path, differs);
      else spdlog::warn("{}: evaluated with {} (written over by another command?): evaluated again", path, differs);
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
      if (adopted.count(c.name)) spdlog::info("{}: probed with {}, the experiment's earlier settings: probed again", file, differs);
      else spdlog::warn("{}: probed with {} (written over by another command?): probed again", file, differs);
      remove_stale_files({file, dir + "/probe-" + it.key() + ".png"});
    }
  }
}

}  // namespace poslab::runner_parts
