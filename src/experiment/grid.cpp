// Experiment files and grid expansion: the cartesian product of the grid's value lists, in file order.
#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <spdlog/spdlog.h>

#include "config/config.h"
#include "data/corpus.h"
#include "experiment/experiment.h"
#include "probe/mqar.h"
#include "probe/probe.h"
#include "util/files.h"
#include "util/sha256.h"

namespace poslab {
using nlohmann::json;

std::string grid_value_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string scenario_text(const Experiment& e, const std::vector<std::string>& keys, const json& settings,
                          const std::string& item_key, std::set<std::string>* named) {
  std::string scenario;
  for (const auto& k : keys)
    if (k != item_key && settings.contains(k) && !(e.grid.contains(k) && e.grid[k].size() == 1)) {  // one value: no scenario
      scenario += (scenario.empty() ? "" : ", ") + k.substr(k.rfind('.') + 1) + "=" + grid_value_text(settings[k]);
      if (named != nullptr) named->insert(k.substr(k.rfind('.') + 1));
    }
  return scenario;
}

// A grid value as a cell's name spells it: the name names the cell's directory, config and log files, so a
// value holding '/' (a file's path: file keys are made absolute) reads as its last component and a hash of
// the whole, two files of one name in two folders staying two cells.
static std::string cell_name_text(const json& v) {
  const std::string text = grid_value_text(v);
  if (text.find('/') == std::string::npos) return text;
  const std::string last = text.substr(text.rfind('/') + 1);
  return (last.empty() ? std::string("path") : last) + "~" + sha256_hex(text).substr(0, 8);
}

static std::string short_key(const std::string& key, const json& grid) {
  // The last path component names a key unless two grid keys share it.
  auto last = key.substr(key.rfind('.') + 1);
  int same = 0;
  for (auto it = grid.begin(); it != grid.end(); ++it) same += it.key().substr(it.key().rfind('.') + 1) == last;
  return same > 1 ? key : last;
}

// Applies KEY=VALUE from an experiment file; an error names the file's own key (`at`, e.g.
// "experiment x.json: grid.model.n_layr"), not a --set flag the user never typed. A file's path (data
// files, a tokenizer, a plug-in) is relative to the experiment file, as it is to a config file.
static void apply_file_override(json& config, const std::string& key, const json& value, const std::string& at,
                                const std::string& file) {
  try {
    apply_overrides(config, {key + "=" + value.dump()}, file);
  } catch (const ConfigError& e) {
    std::string what = e.what();
    const std::string flag = "--set " + key;
    throw ConfigError(at + (what.rfind(flag, 0) == 0 ? what.substr(flag.size()) : ": " + what));
  }
}

Experiment load_experiment(const std::string& path) {
  require_rereadable(path, "experiment");
  json file = read_json_file(path);
  const std::string where = "experiment " + path;
  if (!file.is_object()) throw ConfigError(where + ": expected a JSON object");
  for (auto it = file.begin(); it != file.end(); ++it)
    if (it.key() != "name" && it.key() != "description" && it.key() != "base" && it.key() != "set" && it.key() != "grid" &&
        it.key() != "seeds" && it.key() != "eval_grid" && it.key() != "probes" && it.key() != "jobs")
      throw ConfigError(where + ": unknown key '" + it.key() +
                        "' (allowed: name, description, base, set, grid, seeds, eval_grid, probes, jobs)" +
                        // A training config given where an experiment belongs: say what to run instead.
                        (file.contains("model") || file.contains("data") || file.contains("train")
                             ? "; it looks like a training config: train it with poslab train -c " + path +
                                   ", or name it as an experiment's base"
                             : ""));
  if (!file.contains("base") || !file["base"].is_string()) throw ConfigError(where + ": base must name a config file");
  if (!file.contains("grid") || !file["grid"].is_object())
    throw ConfigError(where + ": grid must be an object of key -> list of values");
  if (file["grid"].empty()) throw ConfigError(where + ": grid is empty: give at least one key -> list of values");
  Experiment e;
  e.path = path;
  if (file.contains("name") && !file["name"].is_string()) throw ConfigError(where + ": name must be a string");
  e.name = file.value("name", std::filesystem::path(path).stem().string());
  // The name is the default output folder under runs/: it must be one folder's name, not a path.
  if (e.name.empty() || e.name == "." || e.name == ".." || e.name.find('/') != std::string::npos ||
      std::any_of(e.name.begin(), e.name.end(), [](unsigned char ch) { return ch < 0x20; }))
    throw ConfigError(where + ": name '" + e.name + "' must be a folder's name (it is the default output, runs/NAME): "
                      "not empty, '.', '..', and no '/' or control characters");
  e.description = file.value("description", "");
  e.grid = file["grid"];
  if (file.contains("jobs")) {
    const auto& j = file["jobs"];
    if (!j.is_number_integer() || j.get<int64_t>() < 1 || j.get<int64_t>() > 256)
      throw ConfigError(where + ": jobs must be an integer from 1 to 256 (cells run at once), got " + j.dump());
    e.jobs = j.get<int>();
  }
  if (file.contains("probes")) {
    if (!file["probes"].is_object()) throw ConfigError(where + ": probes must be an object of task -> options");
    for (auto it = file["probes"].begin(); it != file["probes"].end(); ++it)
      e.probes[it.key()] = probe_options_to_json(probe_options_from_json(it.key(), it.value(), where + ": probes." + it.key()));
  }
  if (file.contains("seeds")) {  // "seeds": [1, 2, 3] is the grid key "seed", varied fastest
    const auto& seeds = file["seeds"];
    bool ok = seeds.is_array() && !seeds.empty();
    // A seed is a config's int: a larger one was refused later, under the name grid.seed.
    for (const auto& s : seeds)
      ok = ok && s.is_number_integer() && s.get<int64_t>() >= 0 && s.get<int64_t>() <= std::numeric_limits<int>::max();
    if (!ok) throw ConfigError(where + ": seeds must be a non-empty list of integers from 0 to 2147483647");
    if (e.grid.contains("seed")) throw ConfigError(where + ": give seeds either as \"seeds\" or as grid.seed, not both");
    e.grid["seed"] = seeds;
  }
  const std::string base_path = resolve_relative(path, file["base"].get<std::string>());
  json base = load_config_json(base_path);
  if (file.contains("set")) {
    if (!file["set"].is_object()) throw ConfigError(where + ": set must be an object of key -> value");
    for (auto it = file["set"].begin(); it != file["set"].end(); ++it)
      apply_file_override(base, it.key(), it.value(), where + ": set." + it.key(), path);
  }
  // nlohmann::json sorts keys; the grid's order (which key varies slowest) is the file's.
  std::vector<std::string> file_order;
  auto ordered = nlohmann::ordered_json::parse(read_text_file(path, "experiment"));
  for (auto it = ordered["grid"].begin(); it != ordered["grid"].end(); ++it) file_order.push_back(it.key());
  if (file.contains("seeds")) file_order.push_back("seed");
  std::vector<std::string> keys;
  for (const auto& key : file_order) {
    auto it = e.grid.find(key);
    if (!it.value().is_array() || it.value().empty())
      throw ConfigError(where + ": grid." + it.key() + " must be a non-empty list of values");
    // A value twice would be one model counted as two seeds (or two cells of one name).
    for (size_t a = 0; a < it.value().size(); ++a)
      for (size_t b = a + 1; b < it.value().size(); ++b)
        if (it.value()[a] == it.value()[b])
          throw ConfigError(where + ": " + (it.key() == "seed" && file.contains("seeds") ? std::string("seeds") : "grid." + it.key()) +
                            " lists " + it.value()[a].dump() + " twice (each value is one cell)");
    json probe = base;  // the key must exist in the config schema
    apply_file_override(probe, it.key(), it.value()[0], where + ": grid." + it.key(), path);
    keys.push_back(it.key());
    if (it.key() != "seed") e.group_keys.push_back(it.key());
  }
  if (file.contains("eval_grid")) {
    if (!ordered["eval_grid"].is_object() || ordered["eval_grid"].empty())
      throw ConfigError(where + ": eval_grid must be an object of variant name -> {eval key: value}");
    for (auto it = ordered["eval_grid"].begin(); it != ordered["eval_grid"].end(); ++it) {
      const std::string at = where + ": eval_grid." + it.key();
      if (it.key().empty() || it.key().find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
                                  std::string::npos)
        throw ConfigError(at + ": a variant name may hold only letters, digits, '_', '-' and '.'");
      if (!it.value().is_object()) throw ConfigError(at + " must be an object of eval key -> value");
      EvalVariant v{it.key(), {}};
      for (auto kv = it.value().begin(); kv != it.value().end(); ++kv) {
        if (kv.key().rfind("eval.", 0) != 0)
          throw ConfigError(at + "." + kv.key() + ": only eval.* keys can vary without retraining");
        v.overrides.push_back(kv.key() + "=" + kv.value().dump());
      }
      json probe = base;  // the keys and their types must be valid; the values are checked on every cell below
      for (auto kv = it.value().begin(); kv != it.value().end(); ++kv)
        apply_file_override(probe, kv.key(), kv.value(), at + "." + kv.key(), path);
      // Two variants that set the same keys to the same values would evaluate every cell twice under two
      // names, as a grid value listed twice would train it twice.
      std::vector<std::string> mine = v.overrides;
      std::sort(mine.begin(), mine.end());
      for (const auto& other : e.eval_grid) {
        std::vector<std::string> theirs = other.overrides;
        std::sort(theirs.begin(), theirs.end());
        if (theirs == mine)
          throw ConfigError(at + ": sets what eval_grid." + other.name + " sets" +
                            (mine.empty() ? std::string(" (nothing: the run's own evaluation)") : std::string()) +
                            "; each variant must differ (remove one)");
      }
      e.eval_grid.push_back(v);
    }
  }
  // Whether data.kind was chosen anywhere (base chain, set, grid): the defaults hold it too.
  const auto names_kind = [](const json& o) {  // "data.kind" or "data": {"kind": ...}; a whole "data" counts
    return o.contains("data.kind") || (o.contains("data") && (!o["data"].is_object() || o["data"].contains("kind")));
  };
  const bool kind_chosen = !origin_of("data.kind", base_path, {}).empty() || (file.contains("set") && names_kind(file["set"])) ||
                           names_kind(e.grid);
  // The probes' options, checked above, as each cell's checks below read them.
  std::optional<ProbeOptions> passkey, mqar;
  if (e.probes.contains("passkey")) passkey = probe_options_from_json("passkey", e.probes["passkey"], where + ": probes.passkey");
  if (e.probes.contains("mqar")) mqar = probe_options_from_json("mqar", e.probes["mqar"], where + ": probes.mqar");
  std::map<std::string, std::unique_ptr<Corpus>> opened;  // each cell's data as its checks below opened it
  // Eval lengths against each opened cell's validation split: a length past every cell's would be n/a in the
  // whole grid, found out only after every cell trained (refused below); past some cells' only, said.
  std::map<int, std::vector<std::string>> past_split;  // length -> cells whose validation split is too short
  std::map<int, std::set<std::string>> evaluating;     // length -> cells that evaluate it (own lengths or a variant's)
  std::map<int, std::set<int64_t>> short_splits;       // length -> the sizes of those too-short splits
  bool all_checked = true;                             // false once a cell's data is left to it (SentencePiece)
  const auto tally_lengths = [&](const Config& typed, const Cell& cell, const Corpus* corpus) {
    if (!corpus) all_checked = false;
    const auto* text = dynamic_cast<const TextCorpus*>(corpus);
    for (const int length : std::set<int>(typed.eval.lengths.begin(), typed.eval.lengths.end())) {
      evaluating[length].insert(cell.name);
      if (!text || text->holds_eval_length(length)) continue;
      auto& cells = past_split[length];
      if (cells.empty() || cells.back() != cell.name) cells.push_back(cell.name);
      short_splits[length].insert(text->split_tokens(Split::Val));
    }
  };
  // Cartesian product, first key slowest, so cells of one encoding sit together.
  std::vector<size_t> index(keys.size(), 0);
  while (true) {
    Cell cell;
    json config = base;
    std::string group;
    for (size_t k = 0; k < keys.size(); ++k) {
      const json& v = e.grid[keys[k]][index[k]];
      cell.settings[keys[k]] = v;
      cell.name += (cell.name.empty() ? "" : "_") + short_key(keys[k], e.grid) + "=" + cell_name_text(v);
      if (keys[k] != "seed") {
        const bool only_key = e.group_keys.size() == 1;
        group += (group.empty() ? "" : ", ") + (only_key ? grid_value_text(v) : short_key(keys[k], e.grid) + "=" + grid_value_text(v));
      }
    }
    cell.group = group.empty() ? "all" : group;
    // Its files are named after it (CELL.json, CELL.log, cells/CELL/): within a file name's 255 bytes.
    const size_t longest = 255 - std::string(".json").size() - kAtomicTempSuffixMax;  // CELL.json's temp file
    if (cell.name.size() > longest)
      throw ConfigError(where + ": cell " + cell.name.substr(0, 60) + "...: its name, " + std::to_string(cell.name.size()) +
                        " bytes, is too long for a file name (at most " + std::to_string(longest) +
                        "): shorten the grid's values");
    // Every cell is validated here, before the first one trains: a bad value stops the whole grid.
    for (size_t k = 0; k < keys.size(); ++k)
      apply_file_override(config, keys[k], e.grid[keys[k]][index[k]], where + ": grid." + keys[k], path);
    // Data files named for a cell whose data.kind was never set: its default, task, reads no file (the line
    // forgotten), so the cell would train on the task without a word.
    if (!kind_chosen)
      for (const std::string& key : data_file_keys()) {
        const json& value = config["data"][key.substr(5)];
        if (value.is_string() && !value.get<std::string>().empty())
          throw ConfigError(where + ": cell " + cell.name + ": " + data_file_without_kind(key, "base, set or grid"));
      }
    const Config typed = [&] {
      try {
        return config_from_json(config);
      } catch (const ConfigError& err) {
        throw ConfigError(where + ": cell " + cell.name + ": " + err.what());
      }
    }();
    // What the cell's own `poslab train` would refuse on its data, where finding out is cheap: a task's
    // longest example against the block, a character corpus's passkey documents against the block, token
    // files' format, sizes and ids against their vocabulary (a scan cached beside each file). Each data set
    // is opened once for the cells that share it. Text for SentencePiece is left to its cells: tokenizing
    // it is the first cell's work, into the cache it shares with the others.
    const Corpus* cell_corpus = nullptr;  // its data, where opened here
    if (typed.data.kind == "task" || typed.data.kind == "tokens" || (typed.data.kind == "text" && !typed.data.tokenizer.enabled())) try {
        auto& corpus = opened[config["data"].dump() + " block_size " + std::to_string(typed.model.block_size)];
        if (!corpus) corpus = make_corpus(typed);
        cell_corpus = corpus.get();
        // The vocabulary of characters (or a token files' tokenizer) is known now: whether the probe can write
        // its documents in it is known now too, not once every cell trained.
        if (typed.data.kind != "task" && passkey) try {
            check_passkey_vocabulary(corpus->tokenizer(), typed, *passkey);
          } catch (const ConfigError& err) {
            std::string what = err.what();
            if (what.rfind("--task passkey: ", 0) == 0) what = what.substr(16);
            throw ConfigError("probes.passkey: " + what);
          }
      } catch (const ConfigError& err) {
        throw ConfigError(where + ": cell " + cell.name + ": " + err.what());
      }
    tally_lengths(typed, cell, cell_corpus);
    // And each evaluation variant on it (a RoPE scaling on a cell whose encoding has no rotary frequencies).
    for (const auto& v : e.eval_grid) {
      json variant = config;
      const std::string at = where + ": cell " + cell.name + ", eval_grid." + v.name;
      for (auto kv = ordered["eval_grid"][v.name].begin(); kv != ordered["eval_grid"][v.name].end(); ++kv)
        apply_file_override(variant, kv.key(), kv.value(), at + "." + kv.key(), path);
      try {
        tally_lengths(config_from_json(variant), cell, cell_corpus);
      } catch (const ConfigError& err) {
        throw ConfigError(at + ": " + err.what());
      }
    }
    // The mqar probe scores a model trained on mqar: knowable now, not after the cells trained.
    if (mqar && !(typed.data.kind == "task" && typed.data.task == "mqar"))
      throw ConfigError(where + ": cell " + cell.name + ": probes.mqar scores runs trained on data.task mqar, not on " +
                        (typed.data.kind == "task" ? "data.task " + typed.data.task : "data.kind " + typed.data.kind));
    // Its lengths against the cell's pairs and queries: refused after every cell trained, the probe was lost.
    if (mqar) {
      try {
        check_mqar_probe(typed, *mqar);
      } catch (const ConfigError& err) {
        std::string what = err.what();
        if (what.rfind("--lengths: ", 0) == 0) what = "lengths: " + what.substr(11);  // the file's key, not the flag
        throw ConfigError(where + ": cell " + cell.name + ": probes.mqar." + what);
      }
    }
    // A passkey is written in characters; a task's vocabulary has symbols only.
    if (passkey && typed.data.kind == "task")
      throw ConfigError(where + ": cell " + cell.name + ": probes.passkey needs a run trained on text (data.kind text or "
                        "tokens), not on data.task " + typed.data.task);
    // The text haystack needs a character-level text run: knowable now (it failed once every cell had trained).
    if (passkey && passkey->haystack == "text")
      if (const std::string why = text_haystack_refusal(typed); !why.empty())
        throw ConfigError(where + ": cell " + cell.name + ": probes.passkey.haystack text: " + why);
    cell.config = config;
    e.cells.push_back(cell);
    size_t k = keys.size();
    while (k > 0 && ++index[k - 1] == e.grid[keys[k - 1]].size()) index[--k] = 0;
    if (k == 0) break;
  }
  for (const auto& [length, cells] : past_split) {
    const int64_t split = *short_splits[length].rbegin();
    const std::string longest = short_splits[length].size() > 1 ? "the longest " : "";
    if (all_checked && cells.size() == evaluating[length].size())
      throw ConfigError(where + ": eval.lengths: " + std::to_string(length) + " tokens is past the validation split of every cell (" +
                        longest + std::to_string(split) + " tokens, which scores lengths up to " +
                        std::to_string(split - 1) + "): it would be n/a in every cell once all had trained (give shorter "
                        "lengths, or data with a longer validation split)");
    spdlog::warn("{}: eval.lengths {}: past the validation split of {} of the {} cells that evaluate it (e.g. {}: {}{} "
                 "tokens): n/a there", where, length, cells.size(), evaluating[length].size(), cells.front(), longest, split);
  }
  // A data key of one kind that no cell trains on (grid.data.task over text cells): its values would train
  // the same model under other names, side by side in the tables. Refused, as `--set` refuses it on a config;
  // where only some cells read it, those that do not repeat one another, and that is said.
  std::vector<std::pair<std::string, std::string>> data_keys;  // (key, where it is given)
  for (const auto& key : keys) data_keys.push_back({key, "grid." + key});
  if (file.contains("set") && file["set"].is_object())
    for (auto it = file["set"].begin(); it != file["set"].end(); ++it) data_keys.push_back({it.key(), "set." + it.key()});
  for (const auto& [key, given] : data_keys) {
    const std::string wants = data_key_kind(key);
    if (wants.empty()) continue;
    const bool mqar_key = key.rfind("data.mqar.", 0) == 0;  // read by the mqar task alone
    std::set<std::string> other_kinds;
    std::vector<std::string> ignoring;
    for (const auto& cell : e.cells) {
      const json& d = cell.config["data"];
      const std::string kind = d.value("kind", std::string("task")), task = d.value("task", std::string());
      if (kind == wants && (!mqar_key || task == "mqar")) continue;
      other_kinds.insert(kind == "task" ? "data.task " + task : "data.kind " + kind);
      ignoring.push_back(cell.name);
    }
    const std::string reader = "data.kind " + wants + (mqar_key ? " with data.task mqar" : "");
    std::string trained;
    for (const auto& k : other_kinds) trained += (trained.empty() ? "" : ", ") + k;
    if (ignoring.size() == e.cells.size())
      throw ConfigError(where + ": " + given + ": read by " + reader + ", but every cell trains on " + trained +
                        (given.rfind("grid.", 0) == 0 ? ": its values would train the same model under other names" : "") +
                        " (set data.kind " + wants + (mqar_key ? " and data.task mqar" : "") + ", or remove the key)");
    if (!ignoring.empty() && given.rfind("grid.", 0) == 0 && e.grid[key].size() > 1)
      spdlog::warn("{}: {} is read by {} only: {} cells train on {} and ignore it, so their values repeat one another "
                   "(e.g. {})", where, given, reader, ignoring.size(), trained, ignoring.front());
  }
  return e;
}

}  // namespace poslab
