// Fuzzes the pickle reader for nanoGPT's meta.pkl: every input is read or refused with a
// ConfigError; an accepted one has exactly vocab_size characters.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.h"
#include "data/token_meta.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto m = poslab::parse_meta_pkl(std::string(reinterpret_cast<const char*>(data), size), "fuzz.pkl");
    if (m.vocab_size <= 0 || static_cast<int64_t>(m.itos.size()) != m.vocab_size) __builtin_trap();
  } catch (const poslab::ConfigError&) {
  }
  return 0;
}
