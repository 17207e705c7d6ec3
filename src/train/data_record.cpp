// A run's record of the files it trains on (data_files.json), and the check that --resume, eval, attention
// and a text-haystack probe read the same files: token files truncated, appended to or rewritten since
// would give other tokens under the run's name without a word.
#include <algorithm>
#include <mutex>
#include <set>

#include <spdlog/spdlog.h>

#include "data/file_identity.h"
#include "train/run_dir.h"
#include "util/files.h"

namespace poslab {

void record_data_files(const RunPaths& run, const Config& c) {
  const auto read = data_files_read(c);
  if (read.empty()) return;  // a task: generated, no file
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : read) {
    nlohmann::json entry = file_identity(f.path, f.key);
    entry["role"] = f.role;
    entry["key"] = f.key;
    entry["path"] = f.path;
    files.push_back(entry);
  }
  write_file_atomic(run.data_files(), nlohmann::json{{"files", files}}.dump(1) + "\n");
}

// Whether `what` is said for the first time in this process: compare checks many cells, and its follow-ups'
// thread (a text-haystack probe) may check beside the main one.
static bool first_time(const std::string& what) {
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mu);
  return said.insert(what).second;
}

void check_data_files(const RunPaths& run, const std::vector<std::string>& roles, const std::string& context,
                      const std::string& consequence, std::map<std::string, nlohmann::json>* identities) {
  if (!file_exists(run.data_files())) {
    // A task's run has none (nothing read); a run of files without it lost its record, or predates it: said, once
    // per run, since nothing can tell whether its files changed.
    if (!file_exists(run.config()) || !first_time("no record\n" + run.dir)) return;
    std::string paths;
    for (const auto& f : data_files_read(run.read_config())) paths += (paths.empty() ? "" : ", ") + f.path;
    if (!paths.empty())
      spdlog::warn("{}: {} is missing, the record of the files the run trained on: whether {} changed since cannot "
                   "be checked", context, run.data_files(), paths);
    return;
  }
  const nlohmann::json record = read_json_file(run.data_files());
  std::map<std::string, nlohmann::json> local;  // without a caller's: this call's own
  if (!record.contains("files") || !record["files"].is_array())
    throw ConfigError(run.data_files() + ": not a record of data files (expected {\"files\": [...]})");
  for (const auto& f : record["files"]) {
    if (!f.is_object() || !f.contains("role") || !f.contains("path") || !f.contains("bytes") || !f.contains("sha256"))
      throw ConfigError(run.data_files() + ": an entry lacks role, path, bytes or sha256");
    if (std::find(roles.begin(), roles.end(), f["role"].get<std::string>()) == roles.end()) continue;
    const std::string path = f["path"], key = f.value("key", std::string("data"));
    auto& known = identities != nullptr ? *identities : local;
    if (!known.count(path)) known[path] = file_identity(path, key);
    const nlohmann::json& now = known.at(path);
    std::string what;
    if (now["bytes"] != f["bytes"])
      what = f["bytes"].dump() + " bytes then, " + now["bytes"].dump() + " now";
    else if (now["sha256"] != f["sha256"])
      what = "the same size, other bytes";
    if (!what.empty())
      throw ConfigError(context + ": " + key + " " + path + " changed since the run trained (" + what + "; " +
                        run.data_files() + "): " + consequence);
    // Same size, same sampled blocks, another modification time: an edit between the blocks, or a copy put back.
    if (f.contains("mtime_ns") && now.contains("mtime_ns") && now["mtime_ns"] != f["mtime_ns"] &&
        first_time("modified\n" + run.dir + "\n" + path))
      spdlog::warn("{}: {} {} was modified since the run trained, its size and the {} blocks its record hashed the "
                   "same ({}): an edit between those blocks is not seen; if the file was only copied or touched, "
                   "nothing changed", context, key, path, kIdentityBlocks, run.data_files());
  }
}

void check_validation_files(const std::string& dir) {
  check_data_files(RunPaths{dir}, {"val", "text"}, "run " + dir,
                   "it would read other tokens than the run's validation split; put the file back");
}

}  // namespace poslab
