// Fuzzes poslab's meta.json reader: every input is read or refused with a ConfigError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.h"
#include "data/token_meta.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto m = poslab::parse_meta_json(std::string(reinterpret_cast<const char*>(data), size), "/fuzz/meta.json");
    if (m.vocab_size <= 0 || (m.eot_id >= m.vocab_size)) __builtin_trap();
  } catch (const poslab::ConfigError&) {
  }
  return 0;
}
