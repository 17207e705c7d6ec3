// File helpers: clear read errors and crash-safe writes.
#include "util/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/config.h"

namespace fs = std::filesystem;

namespace poslab {

std::string read_text_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw ConfigError(what + " " + path + ": no such file");
  if (fs::is_directory(path, ec)) throw ConfigError(what + " " + path + ": is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(what + " " + path + ": cannot read (" + std::strerror(errno) + ")");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw ConfigError(what + " " + path + ": read failed");
  return ss.str();
}

static void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void commit_file_atomic(const std::string& tmp_path, const std::string& final_path) {
  fsync_path(tmp_path, false);
  std::error_code ec;
  fs::rename(tmp_path, final_path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp_path, ignored);  // nothing half-written left behind (the name taken by a directory, say)
    throw std::runtime_error("cannot rename " + tmp_path + " to " + final_path + ": " + ec.message());
  }
  std::string dir = fs::path(final_path).parent_path().string();
  fsync_path(dir.empty() ? "." : dir, true);
}

void write_file_atomic(const std::string& path, const std::string& data) {
  // This process's own temp file: two processes writing one path (two evals of one run) would otherwise
  // write into one temp file, and one of them rename the other's bytes into place.
  static std::atomic<unsigned> counter{0};
  write_file_atomic_via(path, data, path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++));
}

void write_file_atomic_via(const std::string& path, const std::string& data, const std::string& tmp) {
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) {
      const std::string reason = std::strerror(errno);
      std::error_code ec;
      fs::remove(tmp, ec);  // nothing half-written left behind
      throw std::runtime_error("cannot write " + path + ": " + reason);
    }
  }
  commit_file_atomic(tmp, path);
}

void write_file_atomic(const std::string& path, const std::vector<char>& data) {
  write_file_atomic(path, std::string(data.begin(), data.end()));
}

std::vector<std::string> remove_stale_files(const std::vector<std::string>& paths) {
  std::vector<std::string> removed;
  for (const auto& path : paths) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) continue;
    if (!fs::remove(path, ec) || ec)
      throw std::runtime_error(path + ": cannot remove it (" + ec.message() + "), and it shows older results");
    removed.push_back(path);
  }
  return removed;
}

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  auto p = fs::weakly_canonical(fs::absolute(path), ec);
  return ec ? path : p.string();
}

std::string resolve_relative(const std::string& from_file, const std::string& relative) {
  fs::path rel(relative);
  if (rel.is_absolute()) return relative;
  return (fs::path(from_file).parent_path() / rel).lexically_normal().string();
}

void check_output_dir(const std::string& path, const std::string& option) {
  std::error_code ec;
  const fs::path p = fs::absolute(path, ec);
  if (fs::exists(p, ec) && !fs::is_directory(p, ec))
    throw ConfigError(option + " " + path + ": exists and is not a directory; choose another path or remove it");
  // The nearest existing ancestor decides whether the directory can be made.
  fs::path existing = p;
  while (!existing.empty() && !fs::exists(existing, ec)) existing = existing.parent_path();
  if (existing.empty()) throw ConfigError(option + " " + path + ": no existing parent directory");
  if (!fs::is_directory(existing, ec))
    throw ConfigError(option + " " + path + ": cannot be created, " + existing.string() + " is a file, not a directory");
  if (::access(existing.c_str(), W_OK | X_OK) != 0)
    throw ConfigError(option + " " + path + ": cannot write in " + existing.string() + " (" + std::strerror(errno) +
                      "); choose a directory you can write");
}

void check_run_writable(const std::string& dir, const std::string& file, const std::string& option) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw ConfigError(option + " " + dir + ": cannot write " + file + " there (" + std::strerror(errno) +
                      "); copy the run where you can write, or run as its owner");
  // A directory (or socket, pipe) where the file goes would stop its rename at the end, after all the work.
  const auto status = fs::symlink_status(dir + "/" + file, ec);
  if (!ec && fs::exists(status) && !fs::is_regular_file(status) && !fs::is_symlink(status))
    throw ConfigError(option + " " + dir + ": cannot write " + file + " there (" + dir + "/" + file + " is " +
                      (fs::is_directory(status) ? "a directory" : "not a regular file") + "); move it away");
}

void require_rereadable(const std::string& path, const std::string& what) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status) || std::filesystem::is_regular_file(status)) return;
  throw ConfigError(what + " " + path + ": not a regular file (a pipe or device?); poslab reads it more than once: "
                    "save it to a file and pass that");
}

bool file_exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

FileLock::FileLock(const std::string& path, const std::string& what, bool shared) {
  // O_CLOEXEC: the processes this one starts must not keep the lock after it ends.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw ConfigError(what + ": cannot create " + path + " (" + std::strerror(errno) + ")");
  if (::flock(fd_, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {0};
    const ssize_t got = ::pread(fd_, buf, sizeof buf - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) throw ConfigError(what + ": cannot lock " + path + " (" + std::strerror(err) + ")");
    const std::string pid = got > 0 ? std::string(buf, static_cast<size_t>(got)) : "";
    throw ConfigError(what + ": another poslab" + (pid.empty() ? "" : " (pid " + pid + ")") +
                      " is writing it; wait for it to finish or stop it, or choose another --out");
  }
  const std::string pid = std::to_string(::getpid());
  // Shared holders write theirs too (the last one's stays): it only names a holder in the message above.
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // The pid is only for the message above: the lock itself holds.
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace poslab
