// Config loading: defaults, "extends", strict merge, --set overrides, and value validation.
// Every error message starts with the key path (or file) so a user can find it at once.
#include "config/config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "model/positional/registry.h"
#include "util/files.h"

namespace poslab {
using nlohmann::json;

static const std::vector<std::string> kTasks = {"copy",   "reverse",  "sort", "addition",
                                                "associative_recall", "parity", "counting", "dyck", "mqar"};

const json& default_config_json() {
  static const json defaults = [] {
    Config c;
    return config_to_json(c);
  }();
  return defaults;
}

static std::string comma_list(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
  return out;
}

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

static const char* type_name(const json& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer (32-bit)";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "null";
}

bool json_fits_int(const json& v) {
  return v.is_number_integer() && v.get<double>() >= INT32_MIN && v.get<double>() <= INT32_MAX;
}

std::string number_text(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return json(x).dump();
}

// Does `value` fit where `expected` (a built-in key's value) stands? Integers may stand for floats, not
// back. The built-in list keys hold integers (eval.lengths); options that kinds declare, whose defaults may be
// lists of anything and objects, are checked by conform_option.
static bool same_type(const json& expected, const json& value) {
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

// ---- options that kinds declare (EncodingSpec::options): a value must have its default's JSON type ----

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

// ---- typed view and value checks ----

// The node at a dotted key ("data.mqar.gaps") of a config tree; nullptr where absent.
static const json* find_key(const json& tree, const std::string& key) {
  const json* node = &tree;
  std::stringstream parts(key);
  for (std::string k; std::getline(parts, k, '.');) {
    if (!node->is_object() || !node->contains(k)) return nullptr;
    node = &(*node)[k];
  }
  return node;
}

// A key of the merged config, which holds every default: absent only by a mistake here.
template <typename T>
static T get(const json& j, const std::string& path) {
  const json* node = find_key(j, path);
  if (!node) throw std::logic_error("config: no default for " + path);
  return node->get<T>();
}

static void require(bool ok, const std::string& key, const std::string& expected, const json& got) {
  if (!ok) throw ConfigError(key + " must be " + expected + ", got " + got.dump());
}

static void one_of(const std::string& key, const std::string& value, const std::vector<std::string>& allowed,
                   const std::string& what) {
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end())
    throw ConfigError(key + ": unknown " + what + " '" + value + "' (allowed: " + comma_list(allowed) + ")");
}

// A rope_scaling section under `at` (ending in '.'); `zero_length` says what original_length 0 means.
static RopeScalingConfig rope_scaling_from_json(const json& full, const std::string& at, const std::string& zero_length) {
  RopeScalingConfig r;
  r.kind = get<std::string>(full, at + "kind");
  r.factor = get<double>(full, at + "factor");
  r.original_length = get<int>(full, at + "original_length");
  one_of(at + "kind", r.kind, {"none", "linear", "ntk", "dynamic_ntk", "yarn"}, "rope scaling");
  require(r.factor >= 1.0, at + "factor", ">= 1 (times the training length)", r.factor);
  require(r.original_length >= 0, at + "original_length", ">= 0 tokens (0 = " + zero_length + ")", r.original_length);
  return r;
}

// A scaling (at `at`, ending in '.') applies to the encoding `kind`: only rotary ones have frequencies to
// stretch. Linear, NTK and YaRN by a factor of 1 are no scaling at all: a variant so written would be labelled
// with a kind and change nothing (dynamic NTK at 1 still grows the base with the length).
static void check_rope_scaling(const RopeScalingConfig& r, const std::string& kind, const std::string& at) {
  if (r.kind != "none" && find_encoding(kind)->family != "rotary")
    throw ConfigError(at + "kind: '" + r.kind + "' applies to rotary encodings (" + comma_list(encoding_kinds_of("rotary")) +
                      "), not to '" + kind + "', which has no rotary frequencies to stretch");
  if ((r.kind == "linear" || r.kind == "ntk" || r.kind == "yarn") && r.factor == 1.0)
    throw ConfigError(at + "factor: rope scaling '" + r.kind + "' needs a factor above 1 (1 scales nothing), e.g. " +
                      "the evaluated length over the training length");
}

static json rope_scaling_to_json(const RopeScalingConfig& r) {
  return {{"kind", r.kind}, {"factor", r.factor}, {"original_length", r.original_length}};
}

// An error about one option of model.pos_encoding. Those are checked once every layer and --set is merged,
// when where each came from is no longer known: load_config finds it again and names it.
struct OptionKeyError : ConfigError {
  std::string key;
  OptionKeyError(std::string k, const std::string& message) : ConfigError(message), key(std::move(k)) {}
};

// Options declared by kinds (EncodingSpec::options) beside the typed built-in keys of model.pos_encoding:
// those of built-in kinds always, a plug-in's once model.pos_encoding.plugin names it. The plug-in is
// loaded here (registering its kinds) and checked against the hash a run recorded, or its hash recorded.
// Given options are type-checked against their declared defaults; the others take the defaults.
static void declared_options_from_json(const json& full, PosEncodingConfig& pe) {
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

// The pos_encoding section; `m` has the validated model sizes. Options of other kinds are ignored.
static PosEncodingConfig pos_encoding_from_json(const json& full, const ModelConfig& m) {
  const std::string at = "model.pos_encoding.";
  PosEncodingConfig pe;
  pe.kind = get<std::string>(full, at + "kind");
  pe.base = get<double>(full, at + "base");
  pe.scale = get<double>(full, at + "scale");
  pe.bits = get<int>(full, at + "bits");
  pe.signed_bits = get<bool>(full, at + "signed");
  pe.rotary_fraction = get<double>(full, at + "rotary_fraction");
  pe.scale_base = get<double>(full, at + "scale_base");
  pe.num_buckets = get<int>(full, at + "num_buckets");
  pe.max_distance = get<int>(full, at + "max_distance");
  pe.mlp_width = get<int>(full, at + "mlp_width");
  pe.init_c = get<double>(full, at + "init_c");
  pe.init_L = get<double>(full, at + "init_L");
  pe.npos = get<int>(full, at + "npos");
  pe.randomize.max_position = get<int>(full, at + "randomize.max_position");
  pe.randomize.eval = get<bool>(full, at + "randomize.eval");
  pe.rope_scaling = rope_scaling_from_json(full, at + "rope_scaling.", "the --init-from run's block_size, else model.block_size");
  pe.plugin = get<std::string>(full, at + "plugin");
  pe.plugin_sha256 = get<std::string>(full, at + "plugin_sha256");
  declared_options_from_json(full, pe);
  one_of(at + "kind", pe.kind, encoding_kinds(), "encoding");
  require(pe.base > 1 && std::isfinite(pe.base), at + "base", "a finite number > 1", pe.base);
  require(pe.scale >= 0 && std::isfinite(pe.scale), at + "scale", "a finite number >= 0 (0 = the kind's default)", pe.scale);
  // The kind's own checks (its file registered them) and, for a plug-in's kind, one trial construction.
  check_positional({pe, m.n_embd, m.n_head, m.block_size});
  check_rope_scaling(pe.rope_scaling, pe.kind, at + "rope_scaling.");
  require(pe.randomize.max_position == 0 || pe.randomize.max_position >= m.block_size, at + "randomize.max_position",
          "0 (off) or >= model.block_size (" + std::to_string(m.block_size) + ")", pe.randomize.max_position);
  return pe;
}

// data.tokenizer (text) and the token-file keys (tokens); each kind ignores the other's.
static void token_data_from_json(const json& full, DataConfig& d) {
  auto& t = d.tokenizer;
  t.sp_vocab_size = get<int>(full, "data.tokenizer.sentencepiece.vocab_size");
  t.sp_model_type = get<std::string>(full, "data.tokenizer.sentencepiece.model_type");
  t.model = get<std::string>(full, "data.tokenizer.model");
  one_of("data.tokenizer.sentencepiece.model_type", t.sp_model_type, {"bpe", "unigram"}, "SentencePiece model type");
  require(t.sp_vocab_size == 0 || (t.sp_vocab_size >= 260 && t.sp_vocab_size <= 1000000),
          "data.tokenizer.sentencepiece.vocab_size", "0 (off) or from 260 (256 bytes + 4 specials) to 1000000",
          t.sp_vocab_size);
  if (t.sp_vocab_size > 0 && !t.model.empty())
    throw ConfigError("data.tokenizer: give sentencepiece.vocab_size (train a model) or model (use one), not both");
  if (t.enabled() && d.kind != "text")
    throw ConfigError("data.tokenizer applies to data.kind text (token files are tokenized already)");
  d.dir = get<std::string>(full, "data.dir");
  d.train_path = get<std::string>(full, "data.train_path");
  d.val_path = get<std::string>(full, "data.val_path");
  d.format = get<std::string>(full, "data.format");
  d.dtype = get<std::string>(full, "data.dtype");
  d.vocab_size = get<int>(full, "data.vocab_size");
  one_of("data.format", d.format, {"auto", "nanogpt", "llmc"}, "token file format");
  one_of("data.dtype", d.dtype, {"auto", "uint16", "uint32"}, "token dtype");
  require(d.vocab_size >= 0, "data.vocab_size", ">= 0 (0 = from meta.json or meta.pkl)", d.vocab_size);
  if (d.kind != "tokens") return;
  if (!d.dir.empty() && (!d.train_path.empty() || !d.val_path.empty()))
    throw ConfigError("data.dir: give data.dir (holding train.bin and val.bin) or data.train_path and data.val_path, not both");
  if (d.dir.empty() && (d.train_path.empty() || d.val_path.empty()))
    throw ConfigError("data.kind tokens needs data.dir (holding train.bin and val.bin) or both data.train_path and data.val_path");
}

Config config_from_json(const json& j) {
  json full = default_config_json();
  merge_config(full, j, "config");  // a run's config.json passes through the same checks
  Config c;
  c.seed = get<int>(full, "seed");
  c.device = get<std::string>(full, "device");
  one_of("device", c.device, {"auto", "cpu", "cuda"}, "device");

  auto& d = c.data;
  d.kind = get<std::string>(full, "data.kind");
  d.task = get<std::string>(full, "data.task");
  d.path = get<std::string>(full, "data.path");
  d.min_len = get<int>(full, "data.min_len");
  d.max_len = get<int>(full, "data.max_len");
  d.symbols = get<int>(full, "data.symbols");
  d.val_fraction = get<double>(full, "data.val_fraction");
  one_of("data.kind", d.kind, {"task", "text", "tokens"}, "data kind");
  one_of("data.task", d.task, kTasks, "task");
  if (d.kind == "text" && d.path.empty()) throw ConfigError("data.path must name a text file when data.kind is text");
  token_data_from_json(full, d);
  require(d.min_len >= 1, "data.min_len", "at least 1", d.min_len);
  require(d.max_len >= d.min_len, "data.max_len", ">= data.min_len (" + std::to_string(d.min_len) + ")", d.max_len);
  require(d.symbols >= 2 && d.symbols <= 26, "data.symbols", "between 2 and 26", d.symbols);
  require(d.val_fraction > 0 && d.val_fraction < 1, "data.val_fraction", "in (0, 1)", d.val_fraction);
  auto& mq = d.mqar;
  mq.queries = get<int>(full, "data.mqar.queries");
  mq.gaps = get<std::string>(full, "data.mqar.gaps");
  mq.power_a = get<double>(full, "data.mqar.power_a");
  mq.space = get<int>(full, "data.mqar.space");
  require(mq.queries >= 0, "data.mqar.queries", ">= 0 (0 = every pair)", mq.queries);
  one_of("data.mqar.gaps", mq.gaps, {"power", "uniform"}, "gap distribution");
  require(mq.power_a > 0 && mq.power_a <= 1, "data.mqar.power_a", "in (0, 1] (1 = uniform)", mq.power_a);
  require(mq.space >= 1 && mq.space <= 64, "data.mqar.space", "between 1 and 64 (query slots per pair)", mq.space);
  if (d.kind == "task" && d.task == "mqar") {
    // Keys are distinct letters, so an example cannot hold more pairs than the key alphabet.
    require(d.max_len <= d.symbols, "data.max_len",
            "<= data.symbols (" + std::to_string(d.symbols) + ") for mqar: each pair needs its own key letter", d.max_len);
  }
  auto& pk = d.probes.passkey;
  pk.fraction = get<double>(full, "data.probes.passkey.fraction");
  pk.digits = get<int>(full, "data.probes.passkey.digits");
  pk.haystack = get<std::string>(full, "data.probes.passkey.haystack");
  pk.template_name = get<std::string>(full, "data.probes.passkey.template");
  pk.loss = get<std::string>(full, "data.probes.passkey.loss");
  require(pk.fraction >= 0 && pk.fraction <= 1, "data.probes.passkey.fraction", "in [0, 1] (of training windows)", pk.fraction);
  require(pk.digits >= 1 && pk.digits <= 18, "data.probes.passkey.digits", "between 1 and 18", pk.digits);
  one_of("data.probes.passkey.haystack", pk.haystack, {"noise", "text"}, "haystack");
  one_of("data.probes.passkey.template", pk.template_name, {"auto", "reference", "compact"}, "template");
  one_of("data.probes.passkey.loss", pk.loss, {"all", "answer"}, "loss");
  if (pk.fraction > 0 && d.kind != "text")
    throw ConfigError("data.probes.passkey.fraction: passkey documents mix into text corpora; data.kind is " + d.kind);
  if (pk.fraction > 0 && d.tokenizer.enabled())
    throw ConfigError("data.probes.passkey.fraction: passkey documents mix into character-level text only, not with "
                      "data.tokenizer (SentencePiece)");

  auto& m = c.model;
  m.n_layer = get<int>(full, "model.n_layer");
  m.n_head = get<int>(full, "model.n_head");
  m.n_embd = get<int>(full, "model.n_embd");
  m.block_size = get<int>(full, "model.block_size");
  m.dropout = get<double>(full, "model.dropout");
  m.bias = get<bool>(full, "model.bias");
  require(m.n_layer > 0, "model.n_layer", "positive", m.n_layer);
  require(m.n_head > 0, "model.n_head", "positive", m.n_head);
  require(m.n_embd > 0, "model.n_embd", "positive", m.n_embd);
  require(m.block_size > 0, "model.block_size", "positive", m.block_size);
  require(m.n_embd % m.n_head == 0, "model.n_embd",
          "divisible by model.n_head (" + std::to_string(m.n_head) + ")", m.n_embd);
  require(m.dropout >= 0 && m.dropout < 1, "model.dropout", "in [0, 1)", m.dropout);
  m.pos_encoding = pos_encoding_from_json(full, m);

  auto& t = c.train;
  t.max_iters = get<int>(full, "train.max_iters");
  t.batch_size = get<int>(full, "train.batch_size");
  t.learning_rate = get<double>(full, "train.learning_rate");
  t.min_lr = get<double>(full, "train.min_lr");
  t.warmup_iters = get<int>(full, "train.warmup_iters");
  t.lr_decay_iters = get<int>(full, "train.lr_decay_iters");
  t.weight_decay = get<double>(full, "train.weight_decay");
  t.beta1 = get<double>(full, "train.beta1");
  t.beta2 = get<double>(full, "train.beta2");
  t.grad_clip = get<double>(full, "train.grad_clip");
  t.eval_interval = get<int>(full, "train.eval_interval");
  t.checkpoint_interval = get<int>(full, "train.checkpoint_interval");
  t.eval_iters = get<int>(full, "train.eval_iters");
  t.log_interval = get<int>(full, "train.log_interval");
  t.precision = get<std::string>(full, "train.precision");
  t.threads = get<int>(full, "train.threads");
  t.batch_shards = get<int>(full, "train.batch_shards");
  t.fused_adamw = get<bool>(full, "train.fused_adamw");
  t.fused_ops = get<bool>(full, "train.fused_ops");
  t.dist_bucket_mb = get<double>(full, "train.dist_bucket_mb");
  require(t.max_iters > 0, "train.max_iters", "positive", t.max_iters);
  require(t.batch_size > 0, "train.batch_size", "positive", t.batch_size);
  require(t.learning_rate > 0, "train.learning_rate", "positive", t.learning_rate);
  require(t.min_lr >= 0 && t.min_lr <= t.learning_rate, "train.min_lr", "in [0, learning_rate]", t.min_lr);
  require(t.warmup_iters >= 0, "train.warmup_iters", ">= 0", t.warmup_iters);
  require(t.lr_decay_iters == 0 || t.lr_decay_iters >= t.warmup_iters, "train.lr_decay_iters",
          "0 (= max_iters) or >= train.warmup_iters", t.lr_decay_iters);
  require(t.weight_decay >= 0, "train.weight_decay", ">= 0", t.weight_decay);
  require(t.beta1 >= 0 && t.beta1 < 1, "train.beta1", "in [0, 1)", t.beta1);
  require(t.beta2 >= 0 && t.beta2 < 1, "train.beta2", "in [0, 1)", t.beta2);
  require(t.grad_clip >= 0, "train.grad_clip", ">= 0 (0 turns clipping off)", t.grad_clip);
  require(t.eval_interval > 0, "train.eval_interval", "positive", t.eval_interval);
  require(t.checkpoint_interval >= 0, "train.checkpoint_interval", ">= 0 (0 = at every evaluation only)",
          t.checkpoint_interval);
  require(t.eval_iters > 0, "train.eval_iters", "positive", t.eval_iters);
  require(t.log_interval > 0, "train.log_interval", "positive", t.log_interval);
  require(t.dist_bucket_mb > 0 && t.dist_bucket_mb <= 4096, "train.dist_bucket_mb", "in (0, 4096] MiB",
          t.dist_bucket_mb);
  one_of("train.precision", t.precision, {"auto", "fp32", "bf16"}, "precision");
  // 1024 as OMP_NUM_THREADS is read: beyond, a typo (100000 started as many OpenMP workers, each with its
  // stack, and the run hung the machine instead of training).
  require(t.threads >= 0 && t.threads <= kMaxThreads, "train.threads", "0 (default) to " + std::to_string(kMaxThreads),
          t.threads);
  require(t.batch_shards >= 0 && t.batch_shards <= t.batch_size, "train.batch_shards",
          "0 (auto), 1 (off) or up to train.batch_size", t.batch_shards);
  require(t.batch_shards <= 1 || c.model.dropout == 0, "train.batch_shards",
          "0 or 1 when model.dropout > 0 (shards would share one dropout RNG and the run would not be reproducible)",
          t.batch_shards);

  auto& e = c.eval;
  e.lengths = get<std::vector<int>>(full, "eval.lengths");
  e.batches = get<int>(full, "eval.batches");
  e.batch_size = get<int>(full, "eval.batch_size");
  e.stride = get<int>(full, "eval.stride");
  e.tokens = get<int>(full, "eval.tokens");
  e.key_short = get<int>(full, "eval.key_short");
  e.key_margin = get<double>(full, "eval.key_margin");
  require(e.key_short >= -1, "eval.key_short", "-1 (off), 0 (a quarter of the training length) or a positive number of tokens", e.key_short);
  // Above 0: a target that sees no more in the whole window than in the short context scores the same both
  // ways up to rounding, and a margin of 0 counted that noise (a key-token count that moved with batch_size).
  require(e.key_margin > 0, "eval.key_margin", "> 0 nats", e.key_margin);
  e.rope_scaling = rope_scaling_from_json(full, "eval.rope_scaling.", "the run's training length: model.block_size, a task's longest example");
  check_rope_scaling(e.rope_scaling, c.model.pos_encoding.kind, "eval.rope_scaling.");
  for (size_t i = 0; i < e.lengths.size(); ++i) {
    require(e.lengths[i] > 0, "eval.lengths", "a list of positive lengths", full["eval"]["lengths"]);
    // A length twice would be one evaluation counted twice (compare's seeds and intervals, the tables).
    require(std::find(e.lengths.begin(), e.lengths.begin() + i, e.lengths[i]) == e.lengths.begin() + i, "eval.lengths",
            "a list of distinct lengths (" + std::to_string(e.lengths[i]) + " is listed twice)", full["eval"]["lengths"]);
  }
  if (c.data.kind != "task" && e.key_short > 0) {
    // Checked before training: otherwise the final evaluation would refuse it after all the steps.
    const int longest = e.lengths.empty() ? 8 * c.model.block_size : *std::max_element(e.lengths.begin(), e.lengths.end());
    require(e.key_short < longest, "eval.key_short",
            "fewer tokens than the longest length evaluated (" + std::to_string(longest) + "), or -1 (off)", e.key_short);
    // The short-context pass runs windows of key_short tokens: a learned table has no rows past its block.
    require(c.model.pos_encoding.kind != "learned" || e.key_short <= c.model.block_size, "eval.key_short",
            "at most model.block_size (" + std::to_string(c.model.block_size) +
                ") with a learned table: the short-context pass reads windows of that many tokens",
            e.key_short);
  }
  require(e.batches > 0, "eval.batches", "positive", e.batches);
  require(e.batch_size > 0, "eval.batch_size", "positive", e.batch_size);
  require(e.stride >= 0, "eval.stride", ">= 0 (0 = half the eval length)", e.stride);
  require(e.tokens >= 0, "eval.tokens", ">= 0 (0 = the whole validation split)", e.tokens);
  return c;
}

json config_to_json(const Config& c) {
  const auto& pe = c.model.pos_encoding;
  json out{
      {"seed", c.seed},
      {"device", c.device},
      {"data",
       {{"kind", c.data.kind}, {"task", c.data.task}, {"path", c.data.path}, {"min_len", c.data.min_len},
        {"max_len", c.data.max_len}, {"symbols", c.data.symbols}, {"val_fraction", c.data.val_fraction},
        {"mqar", {{"queries", c.data.mqar.queries}, {"gaps", c.data.mqar.gaps}, {"power_a", c.data.mqar.power_a},
                  {"space", c.data.mqar.space}}},
        {"probes", {{"passkey", {{"fraction", c.data.probes.passkey.fraction}, {"digits", c.data.probes.passkey.digits},
                                 {"haystack", c.data.probes.passkey.haystack},
                                 {"template", c.data.probes.passkey.template_name}, {"loss", c.data.probes.passkey.loss}}}}},
        {"tokenizer",
         {{"sentencepiece", {{"vocab_size", c.data.tokenizer.sp_vocab_size}, {"model_type", c.data.tokenizer.sp_model_type}}},
          {"model", c.data.tokenizer.model}}},
        {"dir", c.data.dir}, {"train_path", c.data.train_path}, {"val_path", c.data.val_path},
        {"format", c.data.format}, {"dtype", c.data.dtype}, {"vocab_size", c.data.vocab_size}}},
      {"model",
       {{"n_layer", c.model.n_layer}, {"n_head", c.model.n_head}, {"n_embd", c.model.n_embd},
        {"block_size", c.model.block_size}, {"dropout", c.model.dropout}, {"bias", c.model.bias},
        {"pos_encoding",
         {{"kind", pe.kind}, {"base", pe.base}, {"scale", pe.scale}, {"bits", pe.bits}, {"signed", pe.signed_bits},
          {"rotary_fraction", pe.rotary_fraction}, {"scale_base", pe.scale_base}, {"num_buckets", pe.num_buckets},
          {"max_distance", pe.max_distance}, {"mlp_width", pe.mlp_width}, {"init_c", pe.init_c},
          {"init_L", pe.init_L}, {"npos", pe.npos},
          {"randomize", {{"max_position", pe.randomize.max_position}, {"eval", pe.randomize.eval}}},
          {"rope_scaling", rope_scaling_to_json(pe.rope_scaling)}, {"plugin", pe.plugin},
          {"plugin_sha256", pe.plugin_sha256}}}}},
      {"train",
       {{"max_iters", c.train.max_iters}, {"batch_size", c.train.batch_size},
        {"learning_rate", c.train.learning_rate}, {"min_lr", c.train.min_lr},
        {"warmup_iters", c.train.warmup_iters}, {"lr_decay_iters", c.train.lr_decay_iters},
        {"weight_decay", c.train.weight_decay}, {"beta1", c.train.beta1}, {"beta2", c.train.beta2},
        {"grad_clip", c.train.grad_clip}, {"eval_interval", c.train.eval_interval},
        {"checkpoint_interval", c.train.checkpoint_interval},
        {"eval_iters", c.train.eval_iters}, {"log_interval", c.train.log_interval},
        {"precision", c.train.precision}, {"threads", c.train.threads},
        {"batch_shards", c.train.batch_shards}, {"fused_adamw", c.train.fused_adamw},
        {"fused_ops", c.train.fused_ops},
        {"dist_bucket_mb", c.train.dist_bucket_mb}}},
      {"eval",
       {{"lengths", c.eval.lengths}, {"batches", c.eval.batches}, {"batch_size", c.eval.batch_size},
        {"stride", c.eval.stride}, {"tokens", c.eval.tokens}, {"key_short", c.eval.key_short}, {"key_margin", c.eval.key_margin},
        {"rope_scaling", rope_scaling_to_json(c.eval.rope_scaling)}}},
  };
  out["model"]["pos_encoding"].update(pe.options);  // a plug-in's options, beside the built-in keys
  return out;
}

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
