// Fuzzes config loading: JSON text -> strict merge over the defaults -> typed, validated config.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto j = poslab::parse_json_text(text, "fuzz.json");
    auto merged = poslab::default_config_json();
    poslab::merge_config(merged, j, "fuzz.json");
    poslab::config_from_json(merged);
  } catch (const poslab::ConfigError&) {
    // refused with a message: the expected outcome for bad input
  }
  return 0;
}
