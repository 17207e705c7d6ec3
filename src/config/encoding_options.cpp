// Options that kinds declare (EncodingSpec::options) beside the typed keys of model.pos_encoding: a
// plug-in named there is loaded and its hash checked, and each option given must have its declared
// default's JSON type.
#include <algorithm>
#include <map>
#include <optional>

#include "config/config.h"
#include "config/config_parts.h"
#include "model/positional/registry.h"
#include "util/files.h"

namespace poslab {
using nlohmann::json;
using config_parts::comma_list;
using config_parts::same_type;
using config_parts::type_name;
using config_parts::OptionKeyError;

// The types a declared default list's elements have, in words, once each ("a string"; a float among
// them makes its integers "a number", as an integer may stand for a float).
static std::vector<std::string> element_types(const json& list) {
  bool any_float = false;
  for (const auto& e : list) any_float = any_float || e.is_number_float();
  std::vector<std::string> out;
  for (const auto& e : list) {
    const std::string t = any_float && e.is_number() ? "a number" : type_name(e);
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

// The type of a declared default, in words: "a number", "a list of strings", "an object".
static std::string option_type(const json& expected) {
  if (!expected.is_array() || expected.empty()) return type_name(expected);
  static const std::map<std::string, std::string> plural = {
      {"a boolean", "booleans"}, {"an integer (32-bit)", "integers (32-bit)"}, {"a number", "numbers"}, {"a string", "strings"},
      {"a list", "lists"},       {"an object", "objects"},                     {"null", "nulls"}};
  std::string out = "a list of ";
  const auto types = element_types(expected);
  for (size_t i = 0; i < types.size(); ++i) out += (i ? " or " : "") + plural.at(types[i]);
  return out;
}

// Checks `value` against the declared default `expected` at `key` and returns it as stored, or throws
// ConfigError naming the key, the list element ("key[2]") or the object's key ("key.width"), with the type:
//   numbers, strings, booleans: the default's type (an integer may stand for a float, not back);
//   lists: each element must fit one of the default's elements (so the default itself always fits); an empty
//     default list takes any list, as its elements have no type to match;
//   objects: key by key, recursively; a key the default lacks is refused, a missing one takes the default's
//     value; an empty default object takes any object.
static json conform_option(const json& expected, const json& value, const std::string& key) {
  const auto refuse = [&] { return ConfigError(key + " must be " + option_type(expected) + ", got " + value.dump()); };
  if (expected.is_array()) {
    if (!value.is_array()) throw refuse();
    if (expected.empty()) return value;
    json out = json::array();
    for (size_t i = 0; i < value.size(); ++i) {
      const std::string at = key + "[" + std::to_string(i) + "]";
      // The first element of the default it fits; where it fits none, the error of the first one of its kind
      // (a list or an object names the element within), else its type against the list's element types.
      std::optional<json> fitted;
      std::optional<ConfigError> first_error;
      for (const auto& e : expected) {
        const bool same_kind = (e.is_number() && value[i].is_number()) || e.type() == value[i].type();
        if (!same_kind) continue;
        try {
          fitted = conform_option(e, value[i], at);
          break;
        } catch (const ConfigError& err) {
          if (!first_error) first_error = err;
        }
      }
      if (!fitted) {
        if (first_error && (value[i].is_array() || value[i].is_object())) throw *first_error;
        std::string types;
        for (const auto& t : element_types(expected)) types += (types.empty() ? "" : " or ") + t;
        throw ConfigError(at + " must be " + types + ", got " + value[i].dump());
      }
      out.push_back(*fitted);
    }
    return out;
  }
  if (expected.is_object()) {
    if (!value.is_object()) throw refuse();
    if (expected.empty()) return value;
    json out = expected;  // keys not given keep their defaults
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (!expected.contains(it.key())) {
        std::vector<std::string> known;
        for (auto k = expected.begin(); k != expected.end(); ++k) known.push_back(k.key());
        throw ConfigError(key + "." + it.key() + ": unknown key (allowed here: " + comma_list(known) + ")");
      }
      out[it.key()] = conform_option(expected[it.key()], it.value(), key + "." + it.key());
    }
    return out;
  }
  if (!same_type(expected, value)) throw refuse();
  return expected.is_number_float() ? json(value.get<double>()) : value;  // a float stays one in config.json
}

// Options declared by kinds (EncodingSpec::options) beside the typed built-in keys of model.pos_encoding:
// those of built-in kinds always, a plug-in's once model.pos_encoding.plugin names it. The plug-in is
// loaded here (registering its kinds) and checked against the hash a run recorded, or its hash recorded.
// Given options are type-checked against their declared defaults; the others take the defaults.
void config_parts::declared_options_from_json(const json& full, PosEncodingConfig& pe) {
  const std::string at = "model.pos_encoding.";
  const json& section = full["model"]["pos_encoding"];
  const json& builtin = default_config_json()["model"]["pos_encoding"];
  json given = json::object();
  for (auto it = section.begin(); it != section.end(); ++it)
    if (!builtin.contains(it.key())) given[it.key()] = it.value();
  // A built-in kind beside a plug-in (an experiment's "set" names the plug-in for every cell of a grid that
  // holds built-in kinds too): the run neither records the plug-in nor depends on it, so rebuilding or moving
  // it leaves such runs readable. A config being set up still loads it, to check the options given against
  // its declarations; a recorded one (its hash given) drops the plug-in and its options unread.
  const auto* kind_spec = find_encoding(pe.kind);
  if (!pe.plugin.empty() && kind_spec != nullptr && kind_spec->plugin.empty()) {
    const json builtin_options = declared_encoding_options("");
    if (pe.plugin_sha256.empty()) {
      const LoadedPlugin& plugin = load_plugin(absolute_path(pe.plugin), at + "plugin");
      const json declared = declared_encoding_options(plugin.path);
      for (auto it = given.begin(); it != given.end(); ++it)
        if (!declared.contains(it.key()))
          throw OptionKeyError(at + it.key(), at + it.key() + ": unknown key (neither " + pe.kind + " nor plug-in " +
                                                  plugin.path + " declares it)");
    }
    for (auto it = section.begin(); it != section.end(); ++it)
      if (!builtin.contains(it.key()) && !builtin_options.contains(it.key())) given.erase(it.key());
    pe.plugin.clear();
    pe.plugin_sha256.clear();
  }
  if (pe.plugin.empty()) {
    if (!pe.plugin_sha256.empty())
      throw ConfigError(at + "plugin_sha256 is set but " + at + "plugin is empty (the hash belongs to a plug-in)");
    if (const auto* spec = find_encoding(pe.kind); spec && !spec->plugin.empty())
      throw ConfigError(at + "kind '" + pe.kind + "' comes from plug-in " + spec->plugin + ": name it in " + at + "plugin");
  } else {
    pe.plugin = absolute_path(pe.plugin);  // absolute already from a file or --set (resolve_paths); a config built in code may not be
    // A run's recorded plug-in (its hash given) that has moved is found by name in POSLAB_PLUGIN_PATH.
    if (!pe.plugin_sha256.empty()) pe.plugin = find_moved_plugin(pe.plugin, pe.plugin_sha256, at + "plugin");
    const LoadedPlugin& plugin = load_plugin(pe.plugin, at + "plugin");
    if (!pe.plugin_sha256.empty() && pe.plugin_sha256 != plugin.sha256)
      throw ConfigError(at + "plugin " + pe.plugin + ": changed since the run recorded it (sha256 " + pe.plugin_sha256.substr(0, 12) +
                        "..., now " + plugin.sha256.substr(0, 12) + "...); rebuild the plug-in the run was trained with");
    pe.plugin_sha256 = plugin.sha256;
    if (const auto* spec = find_encoding(pe.kind); spec && !spec->plugin.empty() && spec->plugin != plugin.path)
      throw ConfigError(at + "kind '" + pe.kind + "' comes from plug-in " + spec->plugin + ", not from " + pe.plugin);
  }
  const json declared = declared_encoding_options(pe.plugin);
  pe.options = declared;
  for (auto it = given.begin(); it != given.end(); ++it) try {
    if (!declared.contains(it.key())) {
      if (pe.plugin.empty()) {
        std::vector<std::string> known;
        for (auto k = builtin.begin(); k != builtin.end(); ++k) known.push_back(k.key());
        for (auto d = declared.begin(); d != declared.end(); ++d) known.push_back(d.key());
        throw ConfigError(at + it.key() + ": unknown key (allowed here: " + comma_list(known) + "; a plug-in's option needs " +
                          at + "plugin naming the plug-in)");
      }
      std::vector<std::string> names;
      for (auto d = declared.begin(); d != declared.end(); ++d) names.push_back(d.key());
      throw ConfigError(at + it.key() + ": unknown key (with plug-in " + pe.plugin + ", the declared options are " +
                        (names.empty() ? std::string("none") : comma_list(names)) + ")");
    }
    pe.options[it.key()] = conform_option(declared[it.key()], it.value(), at + it.key());
  } catch (const ConfigError& e) {
    throw OptionKeyError(at + it.key(), e.what());
  }
}

}  // namespace poslab
