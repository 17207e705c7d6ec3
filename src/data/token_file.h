// Token files people already have: nanoGPT's raw arrays (no header, little-endian uint16, or uint32)
// and llm.c's shards (a 256 x int32 header: magic, version, token count; magic 20240520 = uint16,
// 20240801 = uint32). Files are memory-mapped read-only and read a window at a time, never whole.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace poslab {

inline constexpr int32_t kLlmcMagicU16 = 20240520;  // llm.c dev/data/data_common.py: "gpt-2"
inline constexpr int32_t kLlmcMagicU32 = 20240801;  // "llama-3"
inline constexpr int64_t kLlmcHeaderBytes = 256 * 4;

// Where the tokens are in a file and how wide each one is.
struct TokenFileLayout {
  std::string format;      // nanogpt | llmc
  int token_bytes = 2;     // 2 (uint16) or 4 (uint32)
  int64_t header_bytes = 0;
  int64_t count = 0;       // tokens in the file
};

// Decides the layout from the file's first bytes (`head`, up to 1024 of them) and its size.
// `format`: auto|nanogpt|llmc (auto: llm.c when the file starts with one of its magics);
// `dtype`: auto|uint16|uint32, the user's data.dtype (for raw files auto means `raw_dtype`, a sidecar's
// dtype or uint16; an llm.c shard's magic overrides only auto). Throws ConfigError naming `source` and what
// was expected. Pure: the fuzz target calls it on arbitrary bytes.
TokenFileLayout token_file_layout(const uint8_t* head, size_t head_size, uint64_t file_size, const std::string& format,
                                  const std::string& dtype, const std::string& source,
                                  const std::string& raw_dtype = "uint16");

// A read-only memory map of one token file.
class TokenFile {
 public:
  TokenFile() = default;
  // `source` is how errors name the file (e.g. "data.val_path /x/val.bin").
  TokenFile(const std::string& path, const std::string& format, const std::string& dtype, const std::string& source,
            const std::string& raw_dtype = "uint16");
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  TokenFile(TokenFile&& other) noexcept;
  TokenFile& operator=(TokenFile&& other) noexcept;

  int64_t size() const { return layout_.count; }
  const TokenFileLayout& layout() const { return layout_; }
  const std::string& path() const { return path_; }
  const std::string& source() const { return source_; }
  // Token i (0 <= i < size()).
  int64_t at(int64_t i) const;
  // Copies tokens [start, start+n) into `out`; throws ConfigError naming the file and byte offset
  // of the first id >= vocab_size (vocab_size 0: no check), or naming the file when it was truncated
  // while mapped.
  void read(int64_t start, int64_t n, int64_t* out, int64_t vocab_size) const;
  // The largest id in the file, from a sequential scan with progress on large files (pread in
  // chunks, so the scan does not grow resident memory), cached in PATH.poslab-scan.json when the
  // directory is writable; the cache is keyed by size and modification time.
  int64_t max_id() const;
  // Byte offset of the first id >= vocab_size, or -1 (a scan; the error path only).
  int64_t first_id_at_or_above(int64_t vocab_size) const;
  // "<source>: token id ID at byte offset ... is not below the vocabulary size N (WHY)"; WHY by default the
  // fix for a new run's data (data.vocab_size, the sidecar), or what a run's own vocabulary means instead.
  std::string offset_message(int64_t index, int64_t id, int64_t vocab_size, const std::string& why = "") const;

 private:
  void close();
  std::string path_, source_;
  TokenFileLayout layout_;
  int fd_ = -1;
  const uint8_t* map_ = nullptr;
  size_t map_bytes_ = 0;
  int guard_ = -1;  // its slot in data/map_guard.h: a truncation while mapped is a clear error, not SIGBUS
};

}  // namespace poslab
