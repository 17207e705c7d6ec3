// What the config's files share inside the library: config_json.cpp (the JSON layers and the strict
// merge), encoding_options.cpp (options that kinds declare), config.cpp (the typed view) and
// load_config.cpp (a file and its --set overrides, refused keys named by where they came from).
// Not part of the API a plug-in or another project uses.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace poslab::config_parts {

inline std::string comma_list(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
  return out;
}

// A JSON value's type in words, as errors name it: "an integer (32-bit)", "a list".
const char* type_name(const nlohmann::json& v);
// Does `value` fit where `expected` (a built-in key's value) stands? Integers may stand for floats, not
// back. The built-in list keys hold integers (eval.lengths); options that kinds declare, whose defaults may be
// lists of anything and objects, are checked by encoding_options.cpp.
bool same_type(const nlohmann::json& expected, const nlohmann::json& value);

// The node at a dotted key ("data.mqar.gaps") of a config tree; nullptr where absent.
const nlohmann::json* find_key(const nlohmann::json& tree, const std::string& key);

// An error about one option of model.pos_encoding. Those are checked once every layer and --set is merged,
// when where each came from is no longer known: load_config finds it again and names it.
struct OptionKeyError : ConfigError {
  std::string key;
  OptionKeyError(std::string k, const std::string& message) : ConfigError(message), key(std::move(k)) {}
};

// Fills pe.options (and checks pe.plugin) from the merged config `full`; see encoding_options.cpp.
void declared_options_from_json(const nlohmann::json& full, PosEncodingConfig& pe);

}  // namespace poslab::config_parts
