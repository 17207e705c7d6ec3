// Loading plug-ins: dlopen, the ABI check, then the plug-in's registrations, all or none.
#include "model/positional/plugin.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <spdlog/spdlog.h>

#include "util/sha256.h"

namespace poslab {
namespace fs = std::filesystem;

static std::string describe(const PluginAbi& a) {
  return "plug-in ABI " + std::to_string(a.poslab_abi) + ", LibTorch " + std::to_string(a.torch_version / 100) + "." +
         std::to_string(a.torch_version % 100) + ", _GLIBCXX_USE_CXX11_ABI " + std::to_string(a.cxx11_abi);
}

// Registrations that a library's static initializers make inside dlopen (a static EncodingRegistrar, the
// in-tree pattern) go to `into` while the guard lives: a throw could not leave dlopen (std::terminate),
// and the kind would be registered before the checks below, even for a file they refuse.
namespace {
struct CollectRegistrations {
  explicit CollectRegistrations(std::vector<EncodingSpec>* into) : previous(collect_registrations(into)) {}
  ~CollectRegistrations() { collect_registrations(previous); }
  std::vector<EncodingSpec>* previous;
};

// A throw from one of the library's own static initializers (a table built as it loads, say) cannot leave
// dlopen either: std::terminate would abort with a core dump. While dlopen runs, terminating says which
// library threw what, in one line, and exits 2 as a refused input does (nothing has been written for it).
std::string g_loading;  // "key path: " of the library being opened
[[noreturn]] void initializer_threw() {
  const std::string line = "poslab: error: " + g_loading + "a static initializer threw as it loaded: " +
                           current_exception_text() + " (the library is not usable)\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  std::_Exit(2);
}
struct TerminateSaysWhichLibrary {
  explicit TerminateSaysWhichLibrary(const std::string& where) : previous(std::set_terminate(initializer_threw)) {
    g_loading = where;
  }
  ~TerminateSaysWhichLibrary() { std::set_terminate(previous); }
  std::terminate_handler previous;
};
}  // namespace

// The checks after dlopen; registers nothing. Returns the kinds to register, or throws ConfigError(where + why).
static std::vector<EncodingSpec> plugin_kinds(void* handle, std::vector<EncodingSpec> from_initializers,
                                              const std::string& where) {
  using AbiFn = PluginAbi (*)();
  using RegisterFn = void (*)(PluginRegistrar&);
  auto abi_fn = reinterpret_cast<AbiFn>(::dlsym(handle, "poslab_plugin_abi"));
  auto register_fn = reinterpret_cast<RegisterFn>(::dlsym(handle, "poslab_plugin_register"));
  if (!abi_fn || !register_fn) {
    std::string kinds;
    for (const auto& spec : from_initializers) kinds += (kinds.empty() ? "'" : ", '") + spec.kind + "'";
    throw ConfigError(where + "not a poslab plug-in (it defines no POSLAB_PLUGIN entry points" +
                      (kinds.empty() ? "" : "; it registered " + kinds + " as it loaded, and nothing is kept") +
                      "; see docs/extending.md)");
  }
  const PluginAbi theirs = abi_fn(), ours = plugin_abi();
  if (theirs.poslab_abi != ours.poslab_abi || theirs.torch_version != ours.torch_version || theirs.cxx11_abi != ours.cxx11_abi)
    throw ConfigError(where + "built for " + describe(theirs) + ", but this poslab has " + describe(ours) +
                      "; rebuild the plug-in against this poslab");
  // Kinds registered as it loaded are its own, checked with those of POSLAB_PLUGIN.
  PluginRegistrar registrar;
  registrar.specs = std::move(from_initializers);
  try {
    register_fn(registrar);
  } catch (...) {  // anything, a std::exception or not: one line, not std::terminate
    throw ConfigError(where + "its registration failed: " + current_exception_text());
  }
  if (registrar.specs.empty()) throw ConfigError(where + "registers no encoding");
  // All or none: check every name before registering any.
  for (size_t i = 0; i < registrar.specs.size(); ++i) {
    const auto& spec = registrar.specs[i];
    if (const std::string problem = registration_problem(spec); !problem.empty()) throw ConfigError(where + problem);
    if (const auto* taken = find_encoding(spec.kind))
      throw ConfigError(where + "registers encoding kind '" + spec.kind + "', which " +
                        (taken->plugin.empty() ? "is a built-in" : "plug-in " + taken->plugin + " registered already"));
    for (size_t j = 0; j < i; ++j)
      if (registrar.specs[j].kind == spec.kind) throw ConfigError(where + "registers encoding kind '" + spec.kind + "' twice");
    if (spec.options.is_null()) registrar.specs[i].options = nlohmann::json::object();
    if (!spec.options.is_object()) throw ConfigError(where + "kind '" + spec.kind + "': its options must be a JSON object");
    // Its options sit beside the built-in keys in model.pos_encoding: they must not take one of their names.
    const auto& builtin = default_config_json()["model"]["pos_encoding"];
    for (auto it = spec.options.begin(); it != spec.options.end(); ++it) {
      if (builtin.contains(it.key()))
        throw ConfigError(where + "kind '" + spec.kind + "': its option '" + it.key() +
                          "' has the name of a built-in key of model.pos_encoding; choose another");
      // A config's value must have its default's type: a null default would take no value but null.
      if (it.value().is_null())
        throw ConfigError(where + "kind '" + spec.kind + "': its option '" + it.key() +
                          "' has a null default, which no config value could replace (a value must have its default's "
                          "type); give a number, string, bool, list or object");
    }
  }
  return std::move(registrar.specs);
}

std::string find_moved_plugin(const std::string& recorded, const std::string& sha256, const std::string& key) {
  std::error_code ec;
  if (fs::exists(recorded, ec)) return recorded;
  const std::string where = key + " " + recorded + ": ";
  const char* env = std::getenv("POSLAB_PLUGIN_PATH");
  const std::string name = fs::path(recorded).filename().string();
  std::string differs;  // candidates of the same name whose content is another build
  std::stringstream dirs(env != nullptr ? env : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const std::string candidate = (fs::path(dir) / name).string();
    if (!fs::is_regular_file(candidate, ec)) continue;
    const std::string found = sha256_file(candidate, "POSLAB_PLUGIN_PATH");
    if (found == sha256) {
      static std::set<std::string> said;  // a command may read the run's config more than once
      if (said.insert(recorded).second)
        spdlog::info("plug-in {} is not where the run recorded it; using {} (the same SHA-256, found in POSLAB_PLUGIN_PATH)",
                     name, candidate);
      return fs::absolute(candidate).lexically_normal().string();
    }
    differs += (differs.empty() ? "" : ", ") + candidate + " (sha256 " + found.substr(0, 12) + "...)";
  }
  if (!differs.empty())
    throw ConfigError(where + "no such file, and POSLAB_PLUGIN_PATH holds only other builds of it: " + differs +
                      ", not the recorded sha256 " + sha256.substr(0, 12) + "...; rebuild the plug-in the run was trained with");
  throw ConfigError(where + "no such file (the run recorded it there; if it moved, set POSLAB_PLUGIN_PATH to the "
                    "directory now holding it: a file of the same name and the recorded sha256 " + sha256.substr(0, 12) +
                    "... is used)");
}

const LoadedPlugin& load_plugin(const std::string& path, const std::string& key) {
  static std::mutex mutex;
  static std::map<std::string, LoadedPlugin> loaded;  // by absolute path: a library is loaded once
  // And refused once: opened again, a library already in the process runs no initializers, so the reason
  // (its kinds registered as it loaded) is kept from the first time.
  static std::map<std::string, std::string> refused;
  std::lock_guard<std::mutex> lock(mutex);
  std::error_code ec;
  const std::string where = key + " " + path + ": ";
  if (path.empty()) throw ConfigError(key + ": empty (the path of a plug-in's shared library)");
  if (!fs::exists(path, ec)) throw ConfigError(where + "no such file");
  if (fs::is_directory(path, ec)) throw ConfigError(where + "is a directory, not a shared library");
  if (!fs::is_regular_file(path, ec)) throw ConfigError(where + "not a regular file (a shared library is one)");
  const std::string absolute = fs::canonical(path, ec).string();
  if (auto it = loaded.find(absolute); it != loaded.end()) return it->second;
  if (auto it = refused.find(absolute); it != refused.end()) throw ConfigError(where + it->second);

  LoadedPlugin plugin{absolute, sha256_file(absolute, key), {}};
  std::vector<EncodingSpec> from_initializers;
  void* handle = nullptr;
  {
    CollectRegistrations collect(&from_initializers);
    TerminateSaysWhichLibrary terminate_says(where);
    // RTLD_LOCAL: the plug-in's own symbols stay its own; it finds poslab's and LibTorch's in the process.
    handle = ::dlopen(absolute.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!handle) {
    const char* why = ::dlerror();
    // Their functions may live in code dlopen unmapped again: never destroy them.
    if (!from_initializers.empty()) (void)new std::vector<EncodingSpec>(std::move(from_initializers));
    throw ConfigError(where + "cannot be loaded (" + std::string(why ? why : "dlopen failed") + ")");
  }
  // The handle stays open for the life of the process, refused or not: the registered functions live in it,
  // and so do those of the specs dropped on a refusal.
  std::vector<EncodingSpec> specs;
  try {
    specs = plugin_kinds(handle, std::move(from_initializers), where);
  } catch (const ConfigError& e) {
    refused.emplace(absolute, std::string(e.what()).substr(where.size()));
    throw;
  }
  for (auto& spec : specs) {
    spec.plugin = absolute;
    plugin.kinds.push_back(spec.kind);
    register_encoding(std::move(spec));
  }
  return loaded.emplace(absolute, std::move(plugin)).first->second;
}

}  // namespace poslab
