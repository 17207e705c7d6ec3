// The config as JSON, before its typed view (config.cpp): parsing with line and column in errors and
// duplicate keys refused, "extends" layers, the strict merge that refuses unknown keys and wrong types,
// --set overrides, and paths resolved relative to the config that names them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <set>
#include <sstream>

#include "config/config.h"
#include "config/config_parts.h"
#include "util/files.h"

namespace poslab {
using nlohmann::json;
using config_parts::comma_list;
using config_parts::same_type;
using config_parts::type_name;

namespace config_parts {

const char* type_name(const json& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer (32-bit)";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "null";
}

bool same_type(const json& expected, const json& value) {
  if (expected.is_number_float()) return value.is_number();
  if (expected.is_number_integer())  // and it must fit the int it is read into
    return json_fits_int(value);
  if (expected.is_array()) {
    if (!value.is_array()) return false;
    for (const auto& item : value)  // the built-in list keys hold integers
      if (!json_fits_int(item)) return false;
    return true;
  }
  return expected.type() == value.type();
}

// The node at a dotted key ("data.mqar.gaps") of a config tree; nullptr where absent.
const json* find_key(const json& tree, const std::string& key) {
  const json* node = &tree;
  std::stringstream parts(key);
  for (std::string k; std::getline(parts, k, '.');) {
    if (!node->is_object() || !node->contains(k)) return nullptr;
    node = &(*node)[k];
  }
  return node;
}

}  // namespace config_parts

json parse_json_text(const std::string& text, const std::string& source) {
  // A key written twice in one object: JSON parsers keep the last one, silently dropping the first (a config's
  // second "model" section wiped its first). Refused, naming the key's dotted path.
  struct Frame {
    std::set<std::string> keys;
    std::string path, last;  // the object's own dotted path; its latest key
    bool array = false;
  };
  std::vector<Frame> frames;
  std::string duplicate;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      std::string path;
      if (!frames.empty()) {
        const Frame& up = frames.back();
        path = up.array ? up.path + "[]" : up.path.empty() ? up.last : up.path + "." + up.last;
      }
      frames.push_back({{}, path, "", event == E::array_start});
    } else if ((event == E::object_end || event == E::array_end) && !frames.empty()) {
      frames.pop_back();
    } else if (event == E::key && !frames.empty()) {
      Frame& f = frames.back();
      f.last = parsed.get<std::string>();
      if (!f.keys.insert(f.last).second && duplicate.empty()) duplicate = f.path.empty() ? f.last : f.path + "." + f.last;
    }
    return true;
  };
  try {
    json parsed = json::parse(text, callback);
    if (!duplicate.empty())
      throw ConfigError(source + ": key " + duplicate + " appears twice in one object (JSON would keep only the "
                        "last; write it once)");
    return parsed;
  } catch (const json::parse_error& e) {
    // nlohmann reports a byte offset; users want line and column.
    size_t line = 1, col = 1;
    for (size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    std::string what = e.what();
    auto pos = what.find("syntax error");
    throw ConfigError(source + ": malformed JSON at line " + std::to_string(line) + ", column " +
                      std::to_string(col) + ": " + (pos == std::string::npos ? what : what.substr(pos)));
  } catch (const json::exception& e) {
    // e.g. a number too large for any numeric type (found by fuzzing)
    throw ConfigError(source + ": unreadable JSON: " + std::string(e.what()));
  }
}

json read_json_file(const std::string& path) {
  return parse_json_text(read_text_file(path, "config"), path);
}

bool json_fits_int(const json& v) {
  return v.is_number_integer() && v.get<double>() >= INT32_MIN && v.get<double>() <= INT32_MAX;
}

std::string number_text(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return json(x).dump();
}

// An option's value merged into the config: objects key by key (a --set of one key of an object option keeps
// the others a file gave), anything else replaced. conform_option checks the result once all is merged.
static void merge_option(json& slot, const json& value) {
  if (!slot.is_object() || !value.is_object()) {
    slot = value;
    return;
  }
  for (auto it = value.begin(); it != value.end(); ++it) merge_option(slot[it.key()], it.value());
}

static void merge_at(json& base, const json& patch, const std::string& prefix, const std::string& where) {
  if (!patch.is_object())
    throw ConfigError(where + ": " + (prefix.empty() ? "the config" : prefix) + " must be an object, got " +
                      type_name(patch));
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    // Options that kinds declare sit beside the built-in keys of model.pos_encoding. A plug-in's are known
    // only once it is loaded, and model.pos_encoding.plugin may come after them: in a later layer, a later
    // --set, an experiment's set (applied in key order) or the base of an experiment that names it. So every
    // other key is let in here, whatever the order, and declared_options_from_json checks each one against
    // its declaration once everything is merged.
    if (prefix == "model.pos_encoding" && !default_config_json()["model"]["pos_encoding"].contains(it.key())) {
      merge_option(base[it.key()], it.value());
      continue;
    }
    if (!base.contains(it.key())) {
      std::vector<std::string> known;
      for (auto k = base.begin(); k != base.end(); ++k) known.push_back(k.key());
      throw ConfigError(where + ": unknown key '" + key + "' (allowed here: " + comma_list(known) + ")");
    }
    json& slot = base[it.key()];
    if (slot.is_object() && key == "data.probes.passkey" && it.value().is_number()) {
      merge_at(slot, json{{"fraction", it.value()}}, key, where);  // the short form: a fraction of windows
    } else if (slot.is_object()) {
      merge_at(slot, it.value(), key, where);
    } else {
      if (!same_type(slot, it.value()))
        throw ConfigError(where + ": " + key + " must be " + type_name(slot) +
                          (slot.is_array() ? " of integers" : "") + ", got " + it.value().dump());
      // Keep a float slot float, so a later override with a fraction still type-checks.
      slot = slot.is_number_float() ? json(it.value().get<double>()) : it.value();
    }
  }
}

void merge_config(json& base, const json& patch, const std::string& where) { merge_at(base, patch, "", where); }

void resolve_paths(json& tree, const std::string& relative_to) {
  static const std::vector<std::vector<const char*>> keys = {{"data", "path"},      {"data", "dir"},
                                                             {"data", "train_path"}, {"data", "val_path"},
                                                             {"data", "tokenizer", "model"}, {"model", "pos_encoding", "plugin"}};
  for (const auto& key : keys) {
    json* node = &tree;
    for (size_t i = 0; i + 1 < key.size() && node != nullptr; ++i)
      node = node->is_object() && node->contains(key[i]) ? &(*node)[key[i]] : nullptr;
    if (node == nullptr || !node->is_object() || !node->contains(key.back())) continue;
    json& value = (*node)[key.back()];
    if (!value.is_string() || value.get<std::string>().empty()) continue;
    const auto& p = value.get_ref<const std::string&>();
    const std::string resolved = relative_to.empty() ? p : resolve_relative(relative_to, p);
    const std::filesystem::path file = std::filesystem::absolute(resolved).filename();
    if (key.back() == std::string("train_path") || key.back() == std::string("val_path")) {
      // A token file keeps its name, only its directory is resolved: a train.bin linked into a directory is
      // read with that directory's meta.json (and scan cache), not with the ones beside the link's target.
      if (!file.empty() && file != "." && file != "..") {
        value = (std::filesystem::path(absolute_path(std::filesystem::absolute(resolved).parent_path().string())) / file).string();
        continue;
      }
    }
    value = absolute_path(resolved);
  }
}

static json load_layers(const std::string& path, std::set<std::string>& seen) {
  std::string canonical = absolute_path(path);
  if (seen.count(canonical)) throw ConfigError(path + ": \"extends\" forms a cycle");
  seen.insert(canonical);
  require_rereadable(path, "config");
  json file = read_json_file(path);
  if (!file.is_object()) throw ConfigError(path + ": the config must be a JSON object");
  json merged = default_config_json();
  if (file.contains("extends")) {
    if (!file["extends"].is_string()) throw ConfigError(path + ": extends must be a string (a config path)");
    std::string parent = resolve_relative(path, file["extends"].get<std::string>());
    merged = load_layers(parent, seen);
    file.erase("extends");
  }
  resolve_paths(file, path);  // a file named in a config is found relative to that config
  merge_config(merged, file, path);
  return merged;
}

json load_config_json(const std::string& path) {
  std::set<std::string> seen;
  return load_layers(path, seen);
}

void apply_overrides(json& config, const std::vector<std::string>& overrides, const std::string& relative_to) {
  for (const auto& item : overrides) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError("--set " + item + ": expected key.path=value");
    std::string path = item.substr(0, eq), text = item.substr(eq + 1);
    json value;
    try {
      value = json::parse(text);
    } catch (const json::out_of_range&) {  // 1e999: a number, past a double's range (not the string "1e999")
      throw ConfigError("--set " + path + ": " + text + " is past the range of a number (about 1.8e308)");
    } catch (const json::exception&) {
      value = text;  // bare words are strings: kind=rope
    }
    // Build {"a":{"b":value}} and merge it, so overrides get the same checks as files.
    json patch = value;
    std::stringstream parts(path);
    std::vector<std::string> keys;
    for (std::string k; std::getline(parts, k, '.');) keys.push_back(k);
    if (path.front() == '.' || path.back() == '.' || std::find(keys.begin(), keys.end(), "") != keys.end())
      throw ConfigError("--set " + item + ": the key path '" + path + "' has an empty part (expected key.path=value)");
    for (auto k = keys.rbegin(); k != keys.rend(); ++k) patch = json{{*k, patch}};
    resolve_paths(patch, relative_to);
    merge_config(config, patch, "--set " + path);
  }
}

std::string first_config_difference(const json& a, const json& b, const std::string& there, const std::string& here) {
  const auto diff = json::diff(a, b);
  if (diff.empty()) return "";
  json::json_pointer at(diff[0]["path"].get<std::string>());
  while (!at.empty() && (at.back() == "-" || at.back().find_first_not_of("0123456789") == std::string::npos))
    at = at.parent_pointer();
  std::string key = at.to_string().substr(1);
  std::replace(key.begin(), key.end(), '/', '.');
  return key + " is " + (a.contains(at) ? a.at(at).dump() : "unset") + " " + there + ", " +
         (b.contains(at) ? b.at(at).dump() : "unset") + " " + here;
}

}  // namespace poslab
