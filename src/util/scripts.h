// The Python plotting scripts under scripts/: poslab computes the numbers and writes JSON,
// matplotlib draws them. One place finds the scripts and runs them with an interpreter that has
// numpy and matplotlib (Debian's /usr/bin/python3, where pyenv's python3 on PATH may lack them; python3 on
// PATH where /usr/bin/python3 lacks them, as on CUDA images).
#pragma once
#include <string>
#include <vector>

namespace poslab {

// scripts/<relative> from, in turn: $POSLAB_SCRIPTS; an install's share/poslab/scripts beside the running
// executable's bin/ (or beside the library's lib/); when run from the build directory (wherever it lives),
// the source tree it was built from; scripts/ under the current directory. "" when none exists.
std::string find_script(const std::string& relative);
// Runs `PYTHON script args...` (no shell, so paths need no quoting); returns its exit status
// (127 when the interpreter cannot start, 128 + N when killed by signal N). PYTHON: $POSLAB_PLOT_PYTHON, else
// choose_plot_python({"/usr/bin/python3" where it exists, "python3"}).
int run_python_script(const std::string& script, const std::vector<std::string>& args);
// The first of `candidates` (paths, or names looked up on PATH) that imports numpy and matplotlib; else the
// first, whose plot script then says what is missing.
std::string choose_plot_python(const std::vector<std::string>& candidates);
// The plot scripts' exit statuses (scripts/plots/__init__.py): no numpy or matplotlib, a file not written.
constexpr int kPlotsNoMatplotlib = 3;
constexpr int kPlotsWriteFailed = 4;
// Why a plot script exited with `status` (not 0), for a message: "needs python3-matplotlib", "could not write
// its file (see its message above)", or "exited with status N (see its message above)".
std::string plot_failure(int status);
// Checks before any work that `path` can receive an output file: not a directory, a name ending in one
// of `extensions` (".png"; empty: any name), in an existing writable directory. Throws ConfigError "<option> PATH: why".
void check_output_path(const std::string& path, const std::string& option, const std::vector<std::string>& extensions);
// A file removed when this goes out of scope (the JSON handed to a plot script).
struct TempFile {
  std::string path;
  ~TempFile();
};

}  // namespace poslab
