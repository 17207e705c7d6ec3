// Fuzzes the plug-in metadata of a config or a saved run: model.pos_encoding with plugin, plugin_sha256, a
// kind and the plug-in's own options (numbers, lists, objects), over real plug-ins (the example, one with
// list and object options, and the bad ones of tests/plugins), a missing file and a file that is no library.
// Every input is read or refused with a ConfigError; what is read names the plug-in by its absolute path
// with the file's hash, and survives its own JSON round trip.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "util/sha256.h"

namespace {
std::vector<std::string> plugin_paths() {
  const std::string dir = POSLAB_FUZZ_PLUGIN_DIR;
  const std::string text = "/tmp/poslab-fuzz-not-a-library.so";
  std::ofstream(text) << "not an ELF file\n";
  return {dir + "/libgaussian_bias.so",     dir + "/libbad_not_a_plugin.so", dir + "/libbad_abi.so",
          dir + "/libbad_nothing.so",       dir + "/libbad_builtin.so",      dir + "/libbad_twice.so",
          dir + "/libbad_throws.so",        dir + "/libbad_throws_int.so",   dir + "/libbad_static_builtin.so",
          dir + "/libbad_static_free.so",   dir + "/liblist_options.so",     dir + "/no-such-plugin.so",
          text};
}
// A file's true hash, once per path: hashing a 2 MB plug-in under the sanitizers takes a good part of a
// second, and three per input made single inputs run into libFuzzer's timeout on a loaded machine.
const std::string& true_hash(const std::string& path) {
  static std::map<std::string, std::string> known;
  auto it = known.find(path);
  if (it == known.end()) it = known.emplace(path, poslab::sha256_file(path, "plugin")).first;
  return it->second;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::string> paths = plugin_paths();
  if (size < 2) return 0;
  auto pe = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(data) + 2, size - 2), nullptr,
                                  /*allow_exceptions=*/false);
  if (pe.is_discarded() || !pe.is_object()) return 0;
  // The first byte picks the plug-in (or keeps the input's own "plugin" value, whatever its type); the
  // second whether plugin_sha256 is the input's own, the file's true hash, or absent.
  if (data[0] % (paths.size() + 1) < paths.size()) pe["plugin"] = paths[data[0] % (paths.size() + 1)];
  if (data[1] % 3 == 1 && pe.contains("plugin") && pe["plugin"].is_string()) {
    try {
      pe["plugin_sha256"] = true_hash(pe["plugin"].get<std::string>());
    } catch (const poslab::ConfigError&) {
    }
  } else if (data[1] % 3 == 2) {
    pe.erase("plugin_sha256");
  }
  try {
    auto merged = poslab::default_config_json();
    poslab::merge_config(merged, {{"model", {{"pos_encoding", pe}}}}, "fuzz.json");
    const auto config = poslab::config_from_json(merged);
    const auto& got = config.model.pos_encoding;
    if (!got.plugin.empty()) {
      if (got.plugin.front() != '/') __builtin_trap();  // saved absolute
      if (got.plugin_sha256 != true_hash(got.plugin)) __builtin_trap();
    } else if (!got.plugin_sha256.empty()) {
      __builtin_trap();  // a hash without a plug-in is refused
    }
    const auto saved = poslab::config_to_json(config);
    if (poslab::config_to_json(poslab::config_from_json(saved)) != saved) __builtin_trap();
  } catch (const poslab::ConfigError&) {
    // refused with a message: the expected outcome for bad input
  }
  return 0;
}
