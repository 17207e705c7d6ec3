// Spreading a grid over a cluster: which shard this process runs (flag or scheduler variables),
// and the experiment saved beside its cells so the shards' results can be aggregated anywhere.
#include <cstdlib>

#include "config/config.h"
#include "experiment/experiment.h"
#include "util/sha256.h"

namespace poslab {
using nlohmann::json;

Shard shard_from(const std::string& flag) {
  auto number = [](const std::string& text, const std::string& what) {
    size_t used = 0;
    long v = -1;
    try {
      v = std::stol(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != text.size() || v < 0) throw ConfigError(what + ": expected a non-negative integer, got '" + text + "'");
    return static_cast<int>(v);
  };
  Shard s;
  std::string where;
  if (!flag.empty()) {
    const auto slash = flag.find('/');
    if (slash == std::string::npos) throw ConfigError("--shard " + flag + ": expected K/N, e.g. 0/4");
    where = "--shard " + flag;
    s.index = number(flag.substr(0, slash), where);
    s.count = number(flag.substr(slash + 1), where);
  } else if (const char* id = std::getenv("SLURM_ARRAY_TASK_ID")) {
    const char* count = std::getenv("SLURM_ARRAY_TASK_COUNT");
    if (!count) throw ConfigError("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not");
    where = "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT";
    s.index = number(id, "SLURM_ARRAY_TASK_ID");
    s.count = number(count, "SLURM_ARRAY_TASK_COUNT");
    const char* min = std::getenv("SLURM_ARRAY_TASK_MIN");
    const char* max = std::getenv("SLURM_ARRAY_TASK_MAX");
    const int lo = min ? number(min, "SLURM_ARRAY_TASK_MIN") : 0;
    const int hi = max ? number(max, "SLURM_ARRAY_TASK_MAX") : lo + s.count - 1;
    // Only an array of consecutive ids (0-7, 1-8) says which shard of how many a task is. A task resubmitted
    // alone (--array=3) or a list or stepped array (--array=3,5; 0-7:2) does not: as shard 0 of 1 it would
    // train every cell, beside the other shards.
    if (hi - lo + 1 != s.count || (s.count == 1 && s.index != 0))
      throw ConfigError("SLURM_ARRAY_TASK_ID " + std::string(id) + " of an array of " + std::to_string(s.count) +
                        " task(s) from " + std::to_string(lo) + " to " + std::to_string(hi) +
                        ": not consecutive ids, so the shard count is unknown (a resubmitted task?); pass --shard K/N "
                        "(scripts/cluster/slurm_array.sh takes N as its third argument)");
    s.index -= lo;
  } else if (const char* index = std::getenv("JOB_COMPLETION_INDEX")) {
    const char* count = std::getenv("POSLAB_SHARD_COUNT");
    if (!count) throw ConfigError("JOB_COMPLETION_INDEX is set but POSLAB_SHARD_COUNT (the Job's completions) is not");
    where = "JOB_COMPLETION_INDEX/POSLAB_SHARD_COUNT";
    s.index = number(index, "JOB_COMPLETION_INDEX");
    s.count = number(count, "POSLAB_SHARD_COUNT");
  } else {
    return s;
  }
  if (s.count < 1 || s.index < 0 || s.index >= s.count)
    throw ConfigError(where + ": shard " + std::to_string(s.index) + " of " + std::to_string(s.count) +
                      " is out of range (0 <= K < N)");
  return s;
}

std::string cell_config_digest(const json& config) {
  Config c = config_from_json(config);
  c.train.threads = 0;
  c.model.vocab_size = 0;
  return sha256_hex(config_to_json(c).dump());
}

json experiment_to_json(const Experiment& e) {
  json cells = json::array();
  for (const auto& c : e.cells) {
    json cell = {{"name", c.name}, {"group", c.group}, {"settings", c.settings}, {"error", c.error}};
    const std::string digest = !c.config_digest.empty() || !c.error.empty() || c.config.is_null() ? c.config_digest
                                                                                                   : cell_config_digest(c.config);
    if (!digest.empty()) cell["config_sha256"] = digest;
    cells.push_back(cell);
  }
  json variants = json::array();
  for (const auto& v : e.eval_grid) variants.push_back({{"name", v.name}, {"overrides", v.overrides}});
  return {{"name", e.name}, {"path", e.path},   {"description", e.description}, {"grid", e.grid},
          {"group_keys", e.group_keys}, {"cells", cells}, {"eval_grid", variants}, {"probes", e.probes}};
}

Experiment experiment_from_json(const json& j, const std::string& where) {
  try {
    Experiment e;
    e.name = j.at("name").get<std::string>();
    e.path = j.at("path").get<std::string>();
    e.description = j.at("description").get<std::string>();
    e.grid = j.at("grid");
    e.group_keys = j.at("group_keys").get<std::vector<std::string>>();
    for (const auto& c : j.at("cells"))
      e.cells.push_back({c.at("name").get<std::string>(), c.at("group").get<std::string>(), c.at("settings"), json(),
                         c.at("error").get<std::string>(), c.value("config_sha256", std::string())});
    e.probes = j.value("probes", json::object());  // experiments saved before probes existed have none
    for (const auto& v : j.at("eval_grid"))
      e.eval_grid.push_back({v.at("name").get<std::string>(), v.at("overrides").get<std::vector<std::string>>()});
    return e;
  } catch (const json::exception& err) {
    throw ConfigError(where + ": not an experiment.json written by poslab compare (" + std::string(err.what()) + ")");
  }
}

}  // namespace poslab
