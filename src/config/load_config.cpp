// load_config: a config file and its --set overrides to a checked Config, each refused key named with the
// file of the "extends" chain or the --set that gave it (origin_of), and the keys that only some data
// kinds and some encodings read, refused when given on the command line for another.
#include <algorithm>
#include <map>

#include "config/config.h"
#include "config/config_parts.h"
#include "model/positional/registry.h"
#include "util/files.h"

namespace poslab {
using nlohmann::json;
using config_parts::comma_list;
using config_parts::find_key;
using config_parts::OptionKeyError;

// Where `key` of a merged config came from: the last --set that gave it, else the nearest file of the
// "extends" chain that holds it (a file's keys override its parent's). Empty if neither did.
std::string origin_of(const std::string& key, const std::string& path, const std::vector<std::string>& overrides) {
  for (auto item = overrides.rbegin(); item != overrides.rend(); ++item) {
    const std::string set = item->substr(0, item->find('='));
    if (key == set) return "--set " + set;
    if (key.rfind(set + ".", 0) == 0) {  // --set of an object that holds it
      const json value = json::parse(item->substr(item->find('=') + 1), nullptr, /*allow_exceptions=*/false);
      if (find_key(value, key.substr(set.size() + 1))) return "--set " + set;
    }
  }
  for (std::string file = path;;) {  // the chain has no cycle: load_config_json refused one already
    const json layer = read_json_file(file);
    if (find_key(layer, key)) return file;
    if (!layer.contains("extends") || !layer["extends"].is_string()) return "";
    file = resolve_relative(file, layer["extends"].get<std::string>());
  }
}

// Each data key a single kind reads, and that kind.
static const std::map<std::string, std::string>& data_key_kinds() {
  static const std::map<std::string, std::string> kinds = {
      {"data.dir", "tokens"},         {"data.train_path", "tokens"}, {"data.val_path", "tokens"},
      {"data.format", "tokens"},      {"data.dtype", "tokens"},      {"data.vocab_size", "tokens"},
      {"data.path", "text"},          {"data.val_fraction", "text"}, {"data.task", "task"},
      {"data.min_len", "task"},       {"data.max_len", "task"},      {"data.symbols", "task"},
      {"data.mqar.queries", "task"},  {"data.mqar.gaps", "task"},    {"data.mqar.power_a", "task"},
      {"data.mqar.space", "task"}};
  return kinds;
}

std::map<std::string, std::vector<std::string>> encoding_option_readers() {
  // The typed options of the built-in kinds (their registrations in model/positional/ read these fields).
  std::map<std::string, std::vector<std::string>> readers = {
      {"base", {"sinusoidal", "rope", "xpos", "sandwich"}},
      {"bits", {"binary"}},
      {"signed", {"binary"}},
      {"rotary_fraction", {"rope"}},
      {"scale_base", {"xpos"}},
      {"num_buckets", {"t5"}},
      {"max_distance", {"t5"}},
      {"mlp_width", {"fire"}},
      {"init_c", {"fire"}},
      {"init_L", {"fire"}},
      {"npos", {"cope"}}};
  // scale: the kinds with a scale knob; an option a kind declares (a plug-in's): that kind.
  for (const std::string& kind : encoding_kinds()) {
    const EncodingSpec* spec = find_encoding(kind);
    if (spec->default_scale) readers["scale"].push_back(kind);
    for (const auto& option : spec->options.items()) readers[option.key()].push_back(kind);
  }
  return readers;
}

std::string data_key_kind(const std::string& key) {
  const auto& kinds = data_key_kinds();
  const auto it = kinds.find(key);
  return it == kinds.end() ? "" : it->second;
}

const std::vector<std::string>& data_file_keys() {
  static const std::vector<std::string> keys = {"data.dir", "data.train_path", "data.val_path", "data.path"};
  return keys;
}

std::string data_file_without_kind(const std::string& key, const std::string& unset_where) {
  return key + " names data, but data.kind is not set" + (unset_where.empty() ? "" : " (" + unset_where + ")") +
         " and its default, task, reads no file: set data.kind to " + data_key_kind(key);
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  json j = load_config_json(path);
  apply_overrides(j, overrides);
  // data.kind defaults to a synthetic task, which reads no file: a config naming data files without a kind
  // (the line forgotten) would train on the task and never say so, or fail on the task's own checks. A kind
  // given, even task, is a choice (a grid's base may name files that its task cells ignore).
  if (origin_of("data.kind", path, overrides).empty())
    for (const std::string& key : data_file_keys()) {
      const json* value = find_key(j, key);
      if (!value || !value->is_string() || value->get<std::string>().empty()) continue;
      if (const std::string origin = origin_of(key, path, overrides); !origin.empty())
        throw ConfigError(origin + ": " + data_file_without_kind(key));
    }
  // A data key given on the command line for a kind that reads another (--set data.dir=X on a text config,
  // --set data.max_len=40 on one): the run would train on the config's own data as if it were not there. In
  // files a base may hold keys its kinds ignore (a grid's base serves cells of several kinds).
  const json* given_kind = find_key(j, "data.kind");
  const std::string kind = given_kind && given_kind->is_string() ? given_kind->get<std::string>() : "task";
  for (const auto& [key, wants] : data_key_kinds()) {
    const json* value = find_key(j, key);
    if (kind == wants || !value || value->is_null() || *value == json("")) continue;  // "" clears a file key
    if (const std::string origin = origin_of(key, path, overrides); origin.rfind("--set", 0) == 0)
      throw ConfigError(origin + ": " + key + " is read by data.kind " + wants + ", but data.kind is " + kind +
                        ": add --set data.kind=" + wants);
  }
  Config config;
  try {
    config = config_from_json(j);
  } catch (const OptionKeyError& e) {
    const std::string origin = origin_of(e.key, path, overrides);
    if (origin.empty()) throw;
    throw ConfigError(origin + ": " + e.what());
  }
  // The same for an encoding's option: --set model.pos_encoding.rotary_fraction=0.5 on an alibi config would
  // train alibi as if it were not there. Checked once the config is read, when a plug-in's kinds are known.
  const std::string at = "model.pos_encoding.";
  const std::string& pe_kind = config.model.pos_encoding.kind;
  for (const auto& [option, readers] : encoding_option_readers()) {
    if (std::find(readers.begin(), readers.end(), pe_kind) != readers.end()) continue;
    if (const std::string origin = origin_of(at + option, path, overrides); origin.rfind("--set", 0) == 0)
      throw ConfigError(origin + ": " + at + option + " is read by " +
                        (readers.size() == 1 ? at + "kind " + readers[0] : "the kinds " + comma_list(readers)) +
                        ", but " + at + "kind is " + pe_kind + (readers.size() == 1 ? ": add --set " + at + "kind=" + readers[0] : ""));
  }
  return config;
}

}  // namespace poslab
