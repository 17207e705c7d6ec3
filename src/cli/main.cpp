// poslab: train, evaluate and compare positional encodings on a small GPT.
// Exit status: 0 success, 1 runtime failure, 2 bad input (config, data, checkpoint, CLI), 130 interrupted.
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <new>
#include <regex>

#include "cli/commands.h"
#include "config/config.h"
#include "model/positional/positional.h"
#include "train/memory_estimate.h"
#include "train/trainer.h"
#include "util/affinity.h"
#include "util/runtime.h"
#include "util/signals.h"
#include "util/stage.h"

// The first line of a message, so that every error stays one line on the terminal.
static std::string first_line(const std::string& text) {
  const auto nl = text.find('\n');
  return nl == std::string::npos ? text : text.substr(0, nl);
}

// " during evaluation at 16384 tokens": where the failure happened, when a Stage recorded it.
static std::string where() {
  const auto& stage = poslab::Stage::failed_stage();
  return stage.empty() ? "" : " " + stage;
}

// An allocation failure's one line: the stage, the size asked for, what to change. Empty when
// `message` is not about memory. LibTorch's CPU allocator says "you tried to allocate N bytes", its
// CUDA one "Tried to allocate 2.00 GiB".
// What to ask for less of, by command: the model and batch where one trains, else what the command computes.
static std::string what_to_reduce(const std::string& command) {
  if (command == "train" || command == "compare" || command == "bench" || command == "fixture")
    return "reduce model.n_embd, model.n_layer, train.batch_size or the evaluated length (the last checkpoint is intact)";
  if (command == "pe") return "ask for fewer --positions or a smaller --dim";
  if (command == "sample") return "ask for fewer --tokens";
  if (command == "probe") return "ask for shorter --lengths or fewer --trials";
  if (command == "attention") return "ask for shorter --lengths or fewer --sequences";
  return "ask for shorter --lengths or a smaller --batch-size";
}

static std::string out_of_memory_line(const std::string& message, const std::string& command) {
  static const std::regex cpu("can't allocate memory: you tried to allocate ([0-9]+) bytes");
  static const std::regex cuda("out of memory\\. Tried to allocate ([0-9.]+ [KMGT]?i?B)");
  std::smatch m;
  std::string size;
  if (std::regex_search(message, m, cpu)) size = poslab::format_bytes(std::stoll(m[1].str()));
  else if (std::regex_search(message, m, cuda)) size = m[1].str();
  else return "";
  return "out of memory" + where() + ": could not allocate " + size + " more (another process may hold the memory); " +
         what_to_reduce(command);
}

// The command line, for become_training_process()'s re-exec.
static char** g_argv = nullptr;

// Set in the environment of the image restart() starts. That image runs the same checks of its input as the
// first one did up to where that one restarted (become_training_process, use_newest_blas_kernels), and the first
// printed their warnings and notes already (an experiment's eval length past some cells' validation split, said
// twice): until it gets there, this one logs errors only. The variable is dropped at once, so that the processes
// it starts (compare's cells) do not read it.
static constexpr const char* kRestartedVar = "POSLAB_RESTARTED_IMAGE";
static bool g_quiet_until_training = false;
static spdlog::level::level_enum g_level_before_quiet = spdlog::level::info;

namespace poslab::cli {

// OpenBLAS, too, picks its kernels as it loads: where it fell back to kernels older than the CPU (a model its
// tables lack), the new image starts with the right ones (util/runtime.h, openblas_core_for), unless the user
// set OPENBLAS_CORETYPE; compare's cells inherit it. Whether it was set here, for a restart.
static bool set_blas_coretype() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return false;
  const std::string core = poslab::openblas_core_for(poslab::blas_core_name(), poslab::cpu_info()["flags"]);
  if (core.empty()) return false;
  ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  return true;
}

// Called where a command may restart itself (become_training_process, use_newest_blas_kernels): in the
// restarted image, past what the first one said, its own words from here.
static void end_restart_quiet() {
  if (!g_quiet_until_training) return;
  g_quiet_until_training = false;
  if (spdlog::get_level() == spdlog::level::err) spdlog::set_level(g_level_before_quiet);  // unless set since
}

// The same command again, in a new image that reads the environment set above as it loads.
static void restart() {
  // Under OpenMP binding (OMP_PROC_BIND, OMP_PLACES) this thread is pinned to one CPU already, and the new
  // image would inherit the pin: every thread on one core, half the speed on two. It starts unpinned.
  const ThreadAffinity unpinned(openmp_binds() ? usable_cpus() : std::vector<int>{});
  std::cout.flush();
  std::cerr.flush();
  ::setenv(kRestartedVar, "1", 1);
  ::execv("/proc/self/exe", g_argv);  // returns only on failure; then carry on as we are
  ::unsetenv(kRestartedVar);
}

// OpenMP reads OMP_WAIT_POLICY when the library loads, before main: a command that trains sets it and
// re-executes itself once. Measured on a 2-core VM (docs/benchmarks.md): spinning (ACTIVE) workers ran bf16
// (oneDNN) and fp32 batch shards fastest; OpenBLAS's own threads, which fight spinning workers, are then kept
// to one (util/runtime.cpp). A user's setting wins. The commands call this once their input is checked, not at
// start, so that a mistake in a config costs one load of LibTorch (~0.4 s on a Zen 4), not two; evaluation
// runs as fast under OpenMP's own default, and the commands that only evaluate never pay for the second.
void become_training_process() {
  end_restart_quiet();
  if (g_argv == nullptr) return;
  bool again = false;
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    ::setenv("OMP_WAIT_POLICY", "ACTIVE", 1);
    // Under spinning workers OpenBLAS runs one thread anyway (util/runtime.cpp): saying so before it
    // loads keeps it from starting threads that spin ~0.1 s first, in this process and in compare's cells.
    ::setenv("OPENBLAS_NUM_THREADS", "1", /*overwrite=*/0);
    again = true;
  }
  again = set_blas_coretype() || again;
  if (again) restart();
}

void use_newest_blas_kernels() {
  end_restart_quiet();
  if (g_argv != nullptr && set_blas_coretype()) restart();
}

}  // namespace poslab::cli

static int run_poslab(int argc, char** argv);

// Leaving without running static destructors, which in LibTorch deregister thousands of operators one by one:
// a fifth of `poslab --version`'s 1 s on Debian's LibTorch (perf: __cxa_finalize under _dl_fini). Everything
// poslab opened lived in run_poslab() and is closed by now; the streams are flushed here. Sanitizer builds leave
// normally, so that LeakSanitizer's check at exit still runs.
[[noreturn]] static void leave(int status) {
  spdlog::shutdown();
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
#if defined(__SANITIZE_ADDRESS__)
  std::exit(status);
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  std::exit(status);
#endif
#endif
  std::_Exit(status);
}

int main(int argc, char** argv) { leave(run_poslab(argc, argv)); }

static int run_poslab(int argc, char** argv) {
  g_argv = argv;
  poslab::stop_with_parent();  // a process compare started stops when compare is gone
  // Blocked evaluation attention allocates and frees ~20 MiB of scores per query block. glibc
  // mmaps blocks that large and unmaps them on free, so every block faulted fresh pages in: a third
  // of a 16,384-token evaluation's time went to the kernel (perf). Kept in the heap, they are reused:
  // 2.3 s -> 1.6 s there, at ~200 MB more peak RSS; training's small tensors are unaffected.
  mallopt(M_MMAP_THRESHOLD, 128 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  spdlog::set_pattern("%H:%M:%S %v");
  if (std::getenv(kRestartedVar) != nullptr) {
    ::unsetenv(kRestartedVar);
    g_quiet_until_training = true;
    g_level_before_quiet = spdlog::get_level();
    spdlog::set_level(spdlog::level::err);
  }
  const char* debug_env = std::getenv("POSLAB_DEBUG");
  bool debug = debug_env != nullptr && std::string(debug_env) != "0";
  CLI::App app{"poslab: compare positional encodings on a small GPT, in and beyond the training length"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "poslab 0.1.0 (LibTorch " + std::to_string(TORCH_VERSION_MAJOR) + "." +
                                        std::to_string(TORCH_VERSION_MINOR) + "." + std::to_string(TORCH_VERSION_PATCH) + ")");
  app.add_flag("--debug", debug, "On a failure, print LibTorch's full message and stack trace (or POSLAB_DEBUG=1)");
  poslab::cli::add_train(app);
  poslab::cli::add_eval(app);
  poslab::cli::add_compare(app);
  poslab::cli::add_pe(app);
  poslab::cli::add_attention(app);
  poslab::cli::add_probe(app);
  poslab::cli::add_data(app);
  poslab::cli::add_sample(app);
  poslab::cli::add_bench(app);
  poslab::cli::add_fixture(app);
  poslab::cli::add_tokenize(app);
  // The subcommand as typed: an unknown one is named (CLI11 would only say that one is required).
  std::string command;
  for (int i = 1; i < argc && command.empty(); ++i)
    if (argv[i][0] != '-') command = argv[i];
  if (!command.empty()) {
    std::string known;
    bool found = false;
    for (const auto* sub : app.get_subcommands({})) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      found = found || sub->get_name() == command;
    }
    if (!found) {
      std::cerr << "poslab: error: unknown command '" << command << "' (commands: " << known << ")\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ValidationError& e) {
    std::cerr << "poslab: error: " << e.what() << "\n";  // the flag and its allowed values, in words
    return 2;
  } catch (const CLI::ParseError& e) {
    std::cerr << "poslab: error: " << first_line(e.what()) << " (see poslab " << (command.empty() ? "" : command + " ")
              << "--help)\n";
    return 2;
  } catch (const poslab::ConfigError& e) {
    std::cerr << "poslab: error: " << e.what() << "\n";
    return 2;
  } catch (const poslab::DivergenceError& e) {
    std::cerr << "poslab: run failed: " << e.what() << "\n";
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path that cannot be written is bad input, not a crash.
    std::cerr << "poslab: error: " << e.path1().string() << ": " << e.code().message() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "poslab: failed: out of memory" << where() << "; " << what_to_reduce(command) << "\n";
    return 1;
  } catch (const c10::Error& e) {
    // LibTorch's messages carry a C++ stack trace: one line unless asked for it.
    const std::string msg = e.what_without_backtrace();
    const std::string oom = out_of_memory_line(msg, command);
    if (debug) std::cerr << "poslab: failed" << where() << ": " << e.what() << "\n";
    else if (!oom.empty()) std::cerr << "poslab: failed: " << oom << "\n";
    else std::cerr << "poslab: failed" << where() << ": " << first_line(msg) << " (POSLAB_DEBUG=1 shows the trace)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "poslab: failed" << where() << ": " << (debug ? std::string(e.what()) : first_line(e.what())) << "\n";
    return 1;
  } catch (...) {
    // Only code poslab did not write throws these (a plug-in's forward pass, say): a line, not an abort.
    std::cerr << "poslab: failed" << where() << ": an exception that is not a std::exception (thrown by a plug-in?)\n";
    return 1;
  }
  return 0;
}
