// Which files a corpus reads, and their identity (file_identity.h).
#include "data/file_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/sha256.h"

namespace poslab {

std::vector<DataFile> data_files_read(const Config& c) {
  const DataConfig& d = c.data;
  if (d.kind == "text") return {{"text", "data.path", d.path}};
  if (d.kind != "tokens") return {};
  if (!d.dir.empty()) return {{"train", "data.dir", d.dir + "/train.bin"}, {"val", "data.dir", d.dir + "/val.bin"}};
  return {{"train", "data.train_path", d.train_path}, {"val", "data.val_path", d.val_path}};
}

nlohmann::json file_identity(const std::string& path, const std::string& key) {
  const auto fail = [&](const std::string& why) { return ConfigError(key + " " + path + ": cannot be read (" + why + ")"); };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw fail(std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw fail(std::strerror(errno));
  const int64_t size = st.st_size;
  const bool whole = size <= kIdentityWholeBytes;
  std::string bytes;
  auto read_at = [&](int64_t offset, int64_t n) {
    const size_t at = bytes.size();
    bytes.resize(at + static_cast<size_t>(n));
    for (int64_t got = 0; got < n;) {
      const ssize_t r = ::pread(fd, bytes.data() + at + got, static_cast<size_t>(n - got), offset + got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) throw fail(r < 0 ? std::strerror(errno) : "shorter than its size");
      got += r;
    }
  };
  if (whole) {
    read_at(0, size);
  } else {
    bytes.reserve(static_cast<size_t>(kIdentityBlocks * kIdentityBlockBytes));
    for (int64_t i = 0; i < kIdentityBlocks; ++i)
      read_at(i * (size - kIdentityBlockBytes) / (kIdentityBlocks - 1), kIdentityBlockBytes);
  }
  nlohmann::json identity = {{"bytes", size}, {"sha256", sha256_hex(bytes)}, {"hashed", whole ? "whole" : "blocks"}};
  // The modification time goes with the blocks' hash: an edit between the blocks keeps their hash but not this.
  if (!whole) identity["mtime_ns"] = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return identity;
}

}  // namespace poslab
