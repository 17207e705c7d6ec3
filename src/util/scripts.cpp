// Finding scripts/ and running a plotting script as a child process.
#include "util/scripts.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "config/config.h"
#include "util/files.h"

extern char** environ;

namespace poslab {
namespace fs = std::filesystem;

// Where the build put things, as compile definitions (CMakeLists.txt): the build directory, the source
// tree's scripts/, and the installed scripts' place relative to the installed executable and library.
#ifndef POSLAB_BUILD_DIR
#define POSLAB_BUILD_DIR ""
#endif
#ifndef POSLAB_SOURCE_SCRIPTS_DIR
#define POSLAB_SOURCE_SCRIPTS_DIR ""
#endif
#ifndef POSLAB_BIN_TO_SCRIPTS
#define POSLAB_BIN_TO_SCRIPTS "../share/poslab/scripts"
#endif
#ifndef POSLAB_LIB_TO_SCRIPTS
#define POSLAB_LIB_TO_SCRIPTS "../share/poslab/scripts"
#endif

// The directory of the shared library this function is compiled into ("" when not found): an
// application linking poslab_core from an install finds the scripts beside the library.
static fs::path library_dir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&library_dir), &info) == 0 || info.dli_fname == nullptr) return {};
  std::error_code ec;
  fs::path lib = fs::canonical(info.dli_fname, ec);
  return ec ? fs::path() : lib.parent_path();
}

static bool same_dir(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  return !a.empty() && !b.empty() && fs::equivalent(a, b, ec);
}

std::string find_script(const std::string& relative) {
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("POSLAB_SCRIPTS")) candidates.push_back(fs::path(env) / relative);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const fs::path exe_dir = ec ? fs::path() : exe.parent_path(), lib_dir = library_dir();
  // An install: P/bin/poslab or an application linking P/lib/libposlab_core.so; P/share/poslab/scripts.
  if (!exe_dir.empty()) candidates.push_back(exe_dir / POSLAB_BIN_TO_SCRIPTS / relative);
  if (!lib_dir.empty()) candidates.push_back(lib_dir / POSLAB_LIB_TO_SCRIPTS / relative);
  // Run from the build directory (wherever it lives, in the source tree or not): the source tree it was
  // built from. An installed copy never looks there, so an install that lacks its scripts says so.
  if (same_dir(lib_dir, POSLAB_BUILD_DIR) || same_dir(exe_dir, POSLAB_BUILD_DIR))
    candidates.push_back(fs::path(POSLAB_SOURCE_SCRIPTS_DIR) / relative);
  candidates.push_back(fs::current_path(ec) / "scripts" / relative);
  for (const auto& c : candidates)
    if (fs::exists(c, ec)) return c.lexically_normal().string();
  return "";
}

// Runs argv (argv[0] looked up on PATH) and waits; 127 when it cannot start, 128 + N when killed by signal N.
// quiet: its stdout and stderr go to /dev/null.
static int spawn_wait(std::vector<std::string> all, bool quiet) {
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, all[0].c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return 127;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 127;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

std::string choose_plot_python(const std::vector<std::string>& candidates) {
  for (const auto& python : candidates)
    if (spawn_wait({python, "-c", "import numpy, matplotlib"}, /*quiet=*/true) == 0) return python;
  return candidates.empty() ? "python3" : candidates.front();
}

// Asked once per process: importing matplotlib takes a second.
static const std::string& plot_python() {
  static const std::string python = [] {
    if (const char* env = std::getenv("POSLAB_PLOT_PYTHON"); env != nullptr && *env != '\0') return std::string(env);
    std::vector<std::string> candidates;
    if (fs::exists("/usr/bin/python3")) candidates.push_back("/usr/bin/python3");
    candidates.push_back("python3");
    return choose_plot_python(candidates);
  }();
  return python;
}

int run_python_script(const std::string& script, const std::vector<std::string>& args) {
  std::vector<std::string> all = {plot_python(), script};
  all.insert(all.end(), args.begin(), args.end());
  return spawn_wait(all, /*quiet=*/false);
}

std::string plot_failure(int status) {
  if (status == kPlotsNoMatplotlib) return "needs python3-matplotlib";
  if (status == kPlotsWriteFailed) return "could not write its file (see its message above)";
  if (status == 127) return "python3 could not start";
  return "exited with status " + std::to_string(status) + " (see its message above)";
}

void check_output_path(const std::string& path, const std::string& option, const std::vector<std::string>& extensions) {
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) throw ConfigError(option + " " + path + ": is a directory");
  if (!extensions.empty() && std::find(extensions.begin(), extensions.end(), p.extension().string()) == extensions.end()) {
    std::string allowed;
    for (const auto& e : extensions) allowed += (allowed.empty() ? "" : " or ") + e;
    throw ConfigError(option + " " + path + ": the name must end in " + allowed);
  }
  // The file is written through a temp name beside it (write_file_atomic), which must fit a name too: a long
  // name was refused only once the work was done ("File name too long").
  const size_t name_max = 255 - kAtomicTempSuffixMax;
  if (p.filename().string().size() > name_max)
    throw ConfigError(option + " " + path + ": the file name has " + std::to_string(p.filename().string().size()) +
                      " bytes; at most " + std::to_string(name_max) + " fit beside its temp file");
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw ConfigError(option + " " + path + ": " + dir.string() + " is a file, not a directory");
  if (!fs::is_directory(dir, ec)) throw ConfigError(option + " " + path + ": directory " + dir.string() + " does not exist");
  // Whether a file can be made there, by making one: access() answers yes to root for /proc and
  // other places where no file can be created, and the work was then lost at the end.
  std::string probe = (dir / ".poslab-write-check-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    throw ConfigError(option + " " + path + ": directory " + dir.string() + " is not writable: no file can be made there (" + std::strerror(errno) + ")");
  ::close(fd);
  ::unlink(probe.c_str());
  if (fs::exists(p, ec) && ::access(p.c_str(), W_OK) != 0) throw ConfigError(option + " " + path + ": not writable");
}

TempFile::~TempFile() {
  std::error_code ec;
  if (!path.empty()) fs::remove(path, ec);
}

}  // namespace poslab
