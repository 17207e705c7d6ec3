// What poslab learns of its machine for its outputs: the Python that draws the plots (the first candidate
// that imports numpy and matplotlib, tried with stand-in interpreters that can or cannot), and the GPU line.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "util/gpu_info.h"
#include "util/scripts.h"

namespace fs = std::filesystem;

namespace {

// A stand-in interpreter in dir: exits 0 only when asked to import both numpy and matplotlib and `can` is set.
std::string interpreter(const fs::path& dir, const std::string& name, bool can) {
  const fs::path p = dir / name;
  std::ofstream(p) << "#!/bin/sh\n"
                   << (can ? "[ \"$1\" = -c ] && [ \"$2\" = \"import numpy, matplotlib\" ] && exit 0\n" : "")
                   << "exit 1\n";
  ::chmod(p.c_str(), 0755);
  return p.string();
}

}  // namespace

TEST(PlotPython, TheFirstCandidateThatImportsNumpyAndMatplotlib) {
  const fs::path dir = fs::temp_directory_path() / ("poslab-plot-python-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto without = interpreter(dir, "without", false), without2 = interpreter(dir, "without2", false);
  const auto with = interpreter(dir, "with", true), with2 = interpreter(dir, "with2", true);
  const std::string missing = (dir / "absent").string();
  // Debian's /usr/bin/python3 lacking matplotlib (a CUDA image) yields to python3 on PATH that has it.
  EXPECT_EQ(poslab::choose_plot_python({without, with}), with);
  // One that has it is kept, ahead of later ones (pyenv's python3 on PATH lacking it: Debian's is chosen).
  EXPECT_EQ(poslab::choose_plot_python({with, without}), with);
  EXPECT_EQ(poslab::choose_plot_python({with2, with}), with2);
  // An interpreter that does not exist is passed over.
  EXPECT_EQ(poslab::choose_plot_python({missing, with}), with);
  // None has them: the first, whose plot script then says what is missing.
  EXPECT_EQ(poslab::choose_plot_python({without, without2}), without);
  EXPECT_EQ(poslab::choose_plot_python({}), "python3");
  fs::remove_all(dir);
}

// The GPU line summary.json and bench record: written out field by field from the driver's answers; a machine
// without the CUDA driver (libcuda.so.1) has no GPU to name.
TEST(GpuInfo, OneLineFromItsFieldsAndNoneWithoutADriver) {
  const nlohmann::json h200 = {{"name", "NVIDIA H200"}, {"memory_mb", 143771}, {"capability", "9.0"}};
  EXPECT_EQ(poslab::describe_gpu(h200), "NVIDIA H200 (143771 MB, compute capability 9.0)");
  EXPECT_EQ(poslab::describe_gpu(nullptr), "");
  void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver != nullptr) {
    ::dlclose(driver);
    GTEST_SKIP() << "this machine has the CUDA driver";
  }
  EXPECT_TRUE(poslab::gpu_info(0).is_null());
}
