// File helpers shared by every stage: reading with clear errors, and atomic writes
// (temp file, fsync, rename) so a crash or kill -9 never leaves a half-written file.
#pragma once
#include <string>
#include <vector>

namespace poslab {

// Reads a whole file; throws ConfigError "<what> FILE: cannot read (reason)" when it cannot.
std::string read_text_file(const std::string& path, const std::string& what);
// Writes `data` to `path` atomically: a temp file of this process's own (path.tmp.PID.N), fsync, rename, fsync
// of the directory. Two processes writing one path each leave a whole file of their own; the last rename wins.
void write_file_atomic(const std::string& path, const std::string& data);
// The same through the temp file `tmp`, for a file only one process writes (a run's checkpoint, under the
// run's lock): a temp file left by a kill is overwritten by the next write, not left beside it.
void write_file_atomic_via(const std::string& path, const std::string& data, const std::string& tmp);
// The longest temp-file suffix write_file_atomic adds to a name (".tmp.PID.N"): names must leave room for it.
constexpr size_t kAtomicTempSuffixMax = 26;
void write_file_atomic(const std::string& path, const std::vector<char>& data);
// fsyncs `path` then renames it over `final_path` (for files written by other libraries).
void commit_file_atomic(const std::string& tmp_path, const std::string& final_path);
std::string absolute_path(const std::string& path);
// `relative` as seen from the directory holding `from_file`, unless it is absolute.
std::string resolve_relative(const std::string& from_file, const std::string& relative);
bool file_exists(const std::string& path);
// Throws ConfigError "<what> PATH: not a regular file ..." when `path` exists and is a pipe or device
// (`--config <(...)`, /dev/stdin): configs and experiments are read more than once, and a pipe is empty the
// second time. A missing path passes: the read that follows names it.
void require_rereadable(const std::string& path, const std::string& what);
// Before the work of a command that writes `file` into an existing run directory `dir` (eval, probe,
// attention): ConfigError "--run DIR: cannot write FILE there (reason); copy the run where you can write"
// when it cannot. A directory that is not there is left to the command's own "no run here".
void check_run_writable(const std::string& dir, const std::string& file, const std::string& option = "--run");
// Removes those of `paths` that exist: pictures and reports drawn from an older version of a file just
// rewritten, which would no longer show it. Returns the ones removed (a file that cannot be removed throws).
std::vector<std::string> remove_stale_files(const std::vector<std::string>& paths);
// Before any work: `path` must be a directory or creatable as one, and writable. Throws ConfigError
// "OPTION PATH: <reason>; <what to do>" otherwise. Creates nothing.
void check_output_dir(const std::string& path, const std::string& option);

// An exclusive (or shared) lock on `path` (created if missing, holding the owner's pid) for this object's life: two
// processes writing one output directory would train its cells twice and overwrite each other's files. The
// kernel drops it when the process ends, however it ends. Throws ConfigError "<what>: another poslab
// (pid N) is writing it; ..." when another process holds it.
class FileLock {
 public:
  // `shared`: held beside other shared holders of `path`, excluding only an exclusive one (and it them).
  FileLock(const std::string& path, const std::string& what, bool shared = false);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace poslab
