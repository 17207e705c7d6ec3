// The encodings by kind name. Each built-in registers itself from its own file
// (POSLAB_REGISTER_ENCODING), a plug-in from its shared library (model/positional/plugin.h); the
// factory, config validation, `poslab pe` and the docs' lists all look names up here.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"

namespace poslab {

class PositionalEncodingImpl;

// What a kind is built from: its options and the model's sizes.
struct PositionalOptions {
  PosEncodingConfig encoding;
  int64_t n_embd = 64;
  int64_t n_head = 4;
  int64_t block_size = 64;
};

struct EncodingSpec {
  std::string kind;
  std::string family;  // additive | rotary | bias | context | none: what its instances' family() returns
  std::function<std::shared_ptr<PositionalEncodingImpl>(const PositionalOptions&)> make;
  // Checks the kind's own options against the model's sizes before any work; throws ConfigError naming the
  // key (model.pos_encoding.<option>, model.n_embd, ...). Empty: nothing to check.
  std::function<void(const PositionalOptions&)> check;
  // Additive kinds with a scale knob: the multiplier when model.pos_encoding.scale is 0. Empty: no knob.
  std::function<double(int64_t n_embd)> default_scale;
  // Options of its own: keys under model.pos_encoding with their default values, whose JSON types the
  // config's values must match; the kind reads them from PositionalOptions::encoding.options. Plug-ins
  // declare theirs here; so may a new built-in (the older ones read typed fields of PosEncodingConfig).
  nlohmann::json options = nlohmann::json::object();
  // Where the kind appears in listings (help, error messages): the built-ins keep the docs' order.
  int listing = 1000;
  std::string plugin;  // the shared library it came from (absolute path); "" for a built-in
};

// Adds a kind; ConfigError when the name is taken or the spec lacks a name, family or make. While
// load_plugin opens a library (its static initializers run inside dlopen), a registration is collected for
// load_plugin instead: attributed to that file, checked with its other kinds and registered all or none.
void register_encoding(EncodingSpec spec);
// What is wrong with a registration, "" if nothing: a kind name (lowercase letters, digits and '_', from a
// letter: it becomes part of file and cell names), a family of the five, a make function.
std::string registration_problem(const EncodingSpec& spec);
// The kind's spec, or nullptr when no such kind is registered.
const EncodingSpec* find_encoding(const std::string& kind);
// Every registered kind, in listing order.
std::vector<std::string> encoding_kinds();
// Registered kinds of one family, in listing order (e.g. the rotary ones, for error messages).
std::vector<std::string> encoding_kinds_of(const std::string& family);
// The options (EncodingSpec::options, with their defaults) of the built-in kinds and of the kinds of the
// plug-in `plugin` (absolute path; "" for the built-ins alone), merged: the keys model.pos_encoding may
// hold beside its typed built-in ones.
nlohmann::json declared_encoding_options(const std::string& plugin);
// "a, b, c": for error messages.
std::string join_kinds(const std::vector<std::string>& kinds, const std::string& separator = ", ");

// Throws ConfigError "<key> must be <expected>, got <got>" unless ok: the config's own wording, for checks.
void require_option(bool ok, const std::string& key, const std::string& expected, const nlohmann::json& got);

// Static registration from a built-in's own .cpp: `static EncodingRegistrar r{{...}};`. It runs when
// libposlab_core loads (a shared library keeps every object file, so none is dropped at link time).
struct EncodingRegistrar {
  explicit EncodingRegistrar(EncodingSpec spec) { register_encoding(std::move(spec)); }
};

// A plug-in's shared library, loaded once per process (model/positional/plugin.h says how to write one).
struct LoadedPlugin {
  std::string path;    // absolute
  std::string sha256;  // of the file as loaded
  std::vector<std::string> kinds;
};
// Loads the plug-in at `path` (absolute, or relative to the working directory) unless this process already
// has, checks its ABI and registers its kinds. Every failure is one ConfigError: "<key> <path>: why" (no
// such file, not loadable, not a poslab plug-in, ABI mismatch, registers nothing, a kind taken).
const LoadedPlugin& load_plugin(const std::string& path, const std::string& key);

// Where a run's recorded plug-in is now: `recorded` itself if it exists, else the file of the same name in the
// first directory of POSLAB_PLUGIN_PATH (colon-separated, as LD_LIBRARY_PATH) whose content has the recorded
// `sha256`. ConfigError "<key> <recorded>: no such file (...)" saying how to point at a moved one, or naming the
// candidates whose content differs.
std::string find_moved_plugin(const std::string& recorded, const std::string& sha256, const std::string& key);

// For load_plugin: while `into` is not null, register_encoding on this thread appends to it instead of
// registering (static registrations made inside dlopen). Returns the previous target.
std::vector<EncodingSpec>* collect_registrations(std::vector<EncodingSpec>* into);
// What the exception being handled says, for one-line errors about a plug-in's code (call it in a catch):
// a std::exception's what(), a thrown string's text, else the thrown type's name. At most 300 characters.
std::string current_exception_text();

// Validates model.pos_encoding against its kind's spec: the kind exists, its checks pass, and a plug-in
// kind constructs (so a throwing constructor is a config error before any work). Defined in factory.cpp.
void check_positional(const PositionalOptions& options);

}  // namespace poslab
