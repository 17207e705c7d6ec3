// Token files: layout detection (nanoGPT raw / llm.c header), the read-only mmap, and the id scan.
#include "data/token_file.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "config/config.h"
#include "data/map_guard.h"
#include "util/files.h"

namespace poslab {

static int32_t read_i32_le(const uint8_t* p) {
  return static_cast<int32_t>(uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24);
}

static int dtype_bytes(const std::string& dtype) { return dtype == "uint32" ? 4 : 2; }

TokenFileLayout token_file_layout(const uint8_t* head, size_t head_size, uint64_t file_size, const std::string& format,
                                  const std::string& dtype, const std::string& source, const std::string& raw_dtype) {
  TokenFileLayout l;
  const int32_t magic = head_size >= 4 ? read_i32_le(head) : 0;
  const bool has_magic = magic == kLlmcMagicU16 || magic == kLlmcMagicU32;
  // A file under the header's size that starts with the magic is a truncated shard far more likely than a raw
  // array opening with those two ids: read raw, its first id would be refused with no word of the header.
  if (format == "auto" && has_magic && file_size < static_cast<uint64_t>(kLlmcHeaderBytes))
    throw ConfigError(source + ": " + std::to_string(file_size) + " bytes start with llm.c's magic " + std::to_string(magic) +
                      " but are shorter than its 1024-byte header (a truncated shard? data.format nanogpt reads the "
                      "file as a raw array of ids)");
  if (format == "llmc" || (format == "auto" && has_magic)) {
    l.format = "llmc";
    if (file_size < static_cast<uint64_t>(kLlmcHeaderBytes) || head_size < static_cast<size_t>(kLlmcHeaderBytes))
      throw ConfigError(source + ": " + std::to_string(file_size) +
                        " bytes is shorter than llm.c's 1024-byte header (256 int32: magic, version, token count)");
    if (!has_magic)
      throw ConfigError(source + ": expected llm.c's magic 20240520 (uint16 tokens) or 20240801 (uint32) in the first "
                        "4 bytes, found " + std::to_string(magic) + " (a raw nanoGPT array needs data.format nanogpt or auto)");
    l.token_bytes = magic == kLlmcMagicU16 ? 2 : 4;
    if (dtype != "auto" && dtype_bytes(dtype) != l.token_bytes)
      throw ConfigError(source + ": data.dtype is " + dtype + " but the llm.c header (magic " + std::to_string(magic) +
                        ") says uint" + std::to_string(8 * l.token_bytes));
    l.header_bytes = kLlmcHeaderBytes;
    const int32_t count = read_i32_le(head + 8);
    const uint64_t body = file_size - kLlmcHeaderBytes;
    if (count < 0 || static_cast<uint64_t>(count) * l.token_bytes != body)
      throw ConfigError(source + ": the llm.c header says " + std::to_string(count) + " tokens (" +
                        std::to_string(static_cast<int64_t>(count) * l.token_bytes) + " bytes) but the file holds " +
                        std::to_string(body) + " bytes after the header (truncated or not an llm.c shard?)");
    l.count = count;
  } else {
    l.format = "nanogpt";
    l.token_bytes = dtype_bytes(dtype == "auto" ? raw_dtype : dtype);
    if (file_size % l.token_bytes != 0)
      throw ConfigError(source + ": " + std::to_string(file_size) + " bytes is not a whole number of uint" +
                        std::to_string(8 * l.token_bytes) + " tokens (" + std::to_string(l.token_bytes) +
                        " bytes each); truncated, or another dtype (data.dtype)?");
    l.count = static_cast<int64_t>(file_size / l.token_bytes);
  }
  if (l.count == 0) throw ConfigError(source + ": holds no tokens (expected a non-empty token file)");
  return l;
}

TokenFile::TokenFile(const std::string& path, const std::string& format, const std::string& dtype,
                     const std::string& source, const std::string& raw_dtype)
    : path_(path), source_(source) {
  // O_NONBLOCK: opening a FIFO named as a token file would otherwise wait for a writer forever; it is
  // refused below as not a regular file, on which the flag has no effect.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw ConfigError(source + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool dir = S_ISDIR(st.st_mode);
    close();
    throw ConfigError(source + (dir ? ": is a directory, expected a token file" : ": not a regular file (a pipe or device?)"));
  }
  uint8_t head[kLlmcHeaderBytes];
  const ssize_t got = ::pread(fd_, head, sizeof head, 0);
  try {
    layout_ = token_file_layout(head, got > 0 ? static_cast<size_t>(got) : 0, static_cast<uint64_t>(st.st_size), format,
                                dtype, source, raw_dtype);
  } catch (...) {
    close();
    throw;
  }
  // The whole file is mapped, nothing is read: opening costs the same for 10 MB and 10 GB.
  map_bytes_ = static_cast<size_t>(st.st_size);
  void* m = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, fd_, 0);
  if (m == MAP_FAILED) {
    close();
    throw ConfigError(source + ": cannot memory-map (" + std::strerror(errno) + ")");
  }
  map_ = static_cast<const uint8_t*>(m);
  guard_ = guard_mapping(map_, map_bytes_);
  // Training reads windows at random offsets: read-ahead would pull in (and keep resident) pages
  // that are never used.
  ::madvise(const_cast<uint8_t*>(map_), map_bytes_, MADV_RANDOM);
}

void TokenFile::close() {
  unguard_mapping(guard_);
  guard_ = -1;
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), map_bytes_);
  if (fd_ >= 0) ::close(fd_);
  map_ = nullptr;
  fd_ = -1;
}

TokenFile::~TokenFile() { close(); }

TokenFile::TokenFile(TokenFile&& o) noexcept { *this = std::move(o); }

TokenFile& TokenFile::operator=(TokenFile&& o) noexcept {
  if (this != &o) {
    close();
    path_ = std::move(o.path_);
    source_ = std::move(o.source_);
    layout_ = o.layout_;
    fd_ = o.fd_;
    map_ = o.map_;
    map_bytes_ = o.map_bytes_;
    guard_ = o.guard_;
    o.fd_ = -1;
    o.map_ = nullptr;
    o.guard_ = -1;
  }
  return *this;
}

int64_t TokenFile::at(int64_t i) const {
  const uint8_t* p = map_ + layout_.header_bytes + i * layout_.token_bytes;
  if (layout_.token_bytes == 2) return int64_t{p[0]} | int64_t{p[1]} << 8;
  return static_cast<int64_t>(uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24);
}

std::string TokenFile::offset_message(int64_t index, int64_t id, int64_t vocab_size, const std::string& why) const {
  std::string hint = why.empty() ? "set data.vocab_size, or fix meta.json / meta.pkl" : why;
  // A raw read of what looks like an llm.c shard with a magic of neither kind: its header's token count fits
  // the bytes after a 1024-byte header, and the bad id lies in that header.
  const int64_t offset = layout_.header_bytes + index * layout_.token_bytes;
  if (layout_.format == "nanogpt" && offset < kLlmcHeaderBytes && map_bytes_ > static_cast<size_t>(kLlmcHeaderBytes)) {
    const int64_t count = read_i32_le(map_ + 8), body = static_cast<int64_t>(map_bytes_) - kLlmcHeaderBytes;
    const int32_t magic = read_i32_le(map_);
    if (magic == kLlmcMagicU16 || magic == kLlmcMagicU32)  // a whole shard read raw: data.format said nanogpt
      hint = "the file is an llm.c shard (magic " + std::to_string(magic) + "), read as a raw array because data.format "
             "is nanogpt: set data.format to llmc or auto";
    else if (count > 0 && (count * 2 == body || count * 4 == body))
      hint = "the file looks like an llm.c shard whose magic " + std::to_string(magic) +
             " is neither 20240520 (uint16) nor 20240801 (uint32): a damaged header?";
  }
  return source_ + ": token id " + std::to_string(id) + " at byte offset " + std::to_string(offset) + " (token " +
         std::to_string(index) + ") is not below the vocabulary size " + std::to_string(vocab_size) + " (" + hint + ")";
}

void TokenFile::read(int64_t start, int64_t n, int64_t* out, int64_t vocab_size) const {
  int64_t top = -1, top_at = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = at(start + i);
    if (out[i] > top) top = out[i], top_at = start + i;
  }
  // Unmap what was read (the pages stay in the page cache): a mapped page counts in this process's
  // resident memory until unmapped, and over a long run random windows would map the whole file.
  // The kernel maps up to 64 KiB around each fault, so the range is widened to that alignment.
  constexpr uintptr_t kAround = 64 * 1024;
  const auto lo = reinterpret_cast<uintptr_t>(map_), hi = lo + map_bytes_;
  const uintptr_t first = reinterpret_cast<uintptr_t>(map_ + layout_.header_bytes + start * layout_.token_bytes);
  const uintptr_t last = first + static_cast<uintptr_t>(n * layout_.token_bytes);
  const uintptr_t from = std::max(lo, first & ~(kAround - 1));
  const uintptr_t to = std::min(hi, (last + kAround - 1) & ~(kAround - 1));
  if (to > from) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
  if (mapping_lost(guard_)) {
    struct stat st {};
    const std::string now = ::fstat(fd_, &st) == 0 ? std::to_string(st.st_size) + " bytes now" : "its size unknown now";
    throw ConfigError(source_ + ": the file was truncated while this process read it (" + now + ", " +
                      std::to_string(map_bytes_) + " when opened); restore it, or write a changed file under a new name");
  }
  if (vocab_size > 0 && top >= vocab_size) throw ConfigError(offset_message(top_at, top, vocab_size));
}

// Scans every token with pread (a bounded buffer), calling `each(block, count, first_index)`; on a large file
// a progress line every 2 s says `doing` ("checking token ids").
template <typename F>
static void scan_file(int fd, const TokenFileLayout& l, const std::string& source, const std::string& doing, F each) {
  constexpr int64_t kChunk = 1 << 22;  // tokens per read
  std::vector<uint8_t> buf(static_cast<size_t>(kChunk * l.token_bytes));
  const auto t0 = std::chrono::steady_clock::now();
  auto last = t0;
  for (int64_t i = 0; i < l.count; i += kChunk) {
    const int64_t n = std::min(kChunk, l.count - i);
    const size_t want = static_cast<size_t>(n * l.token_bytes);
    size_t have = 0;
    while (have < want) {
      ssize_t r = ::pread(fd, buf.data() + have, want - have, l.header_bytes + i * l.token_bytes + have);
      if (r <= 0) throw ConfigError(source + ": read failed while scanning token ids (" + std::strerror(errno) + ")");
      have += static_cast<size_t>(r);
    }
    if (!each(buf.data(), n, i)) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last > std::chrono::seconds(2)) {
      spdlog::info("{}: {}, {:.0f}%", source, doing, 100.0 * (i + n) / l.count);
      last = now;
    }
  }
}

static int64_t token_in(const uint8_t* p, int64_t k, int bytes) {
  p += k * bytes;
  if (bytes == 2) return int64_t{p[0]} | int64_t{p[1]} << 8;
  return static_cast<int64_t>(uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24);
}

int64_t TokenFile::max_id() const {
  struct stat st {};
  ::fstat(fd_, &st);
  const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  const std::string cache = path_ + ".poslab-scan.json";
  const nlohmann::json key = {{"size", static_cast<int64_t>(st.st_size)}, {"mtime_ns", mtime_ns},
                              {"header_bytes", layout_.header_bytes}, {"token_bytes", layout_.token_bytes}};
  try {
    if (file_exists(cache)) {
      auto j = nlohmann::json::parse(read_text_file(cache, "cache"));
      if (j.value("key", nlohmann::json()) == key && j.contains("max_id")) return j["max_id"].get<int64_t>();
    }
  } catch (const std::exception&) {
    // an unreadable cache is rescanned and rewritten
  }
  int64_t top = 0;
  const int bytes = layout_.token_bytes;
  scan_file(fd_, layout_, source_, "checking token ids", [&](const uint8_t* p, int64_t n, int64_t) {
    for (int64_t k = 0; k < n; ++k) top = std::max(top, token_in(p, k, bytes));
    return true;
  });
  try {
    write_file_atomic(cache, nlohmann::json{{"key", key}, {"max_id", top}}.dump() + "\n");
  } catch (const std::exception&) {
    // a read-only data directory: the scan is repeated next time
  }
  return top;
}

int64_t TokenFile::first_id_at_or_above(int64_t vocab_size) const {
  int64_t found = -1;
  const int bytes = layout_.token_bytes;
  // A second pass, after max_id() found an id too large: its own words, so that its percentages, from 0
  // again, do not read as the first pass going backwards.
  scan_file(fd_, layout_, source_, "finding the first token id >= " + std::to_string(vocab_size),
            [&](const uint8_t* p, int64_t n, int64_t first) {
    for (int64_t k = 0; k < n; ++k)
      if (token_in(p, k, bytes) >= vocab_size) {
        found = first + k;
        return false;
      }
    return true;
  });
  return found;
}

}  // namespace poslab
