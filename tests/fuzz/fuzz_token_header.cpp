// Fuzzes token-file layout detection (nanoGPT raw / llm.c header). The first byte picks the
// format and dtype options, the next 8 the file size claimed; the rest is the file's head.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.h"
#include "data/token_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  static const char* formats[] = {"auto", "nanogpt", "llmc"};
  static const char* dtypes[] = {"auto", "uint16", "uint32"};
  uint64_t file_size = 0;
  for (int k = 0; k < 8; ++k) file_size = file_size << 8 | data[1 + k];
  if (data[0] & 0x80) file_size = size - 9;  // half the inputs: the head is the whole file
  try {
    auto l = poslab::token_file_layout(data + 9, size - 9, file_size, formats[data[0] % 3], dtypes[(data[0] / 3) % 3], "fuzz.bin");
    // Accepted layouts must describe the file exactly.
    if (l.count <= 0 || static_cast<uint64_t>(l.header_bytes) + static_cast<uint64_t>(l.count) * l.token_bytes != file_size)
      __builtin_trap();
  } catch (const poslab::ConfigError&) {
  }
  return 0;
}
