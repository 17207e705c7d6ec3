// What poslab learns of its machine: the Python that draws the plots (the first candidate that imports numpy
// and matplotlib, tried with stand-in interpreters that can or cannot), the GPU line, the OpenBLAS kernels to
// start on, the product timing behind train.precision "auto", and subnormals flushed in every thread.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <ATen/Parallel.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>
#include <filesystem>
#include <fstream>

#include "model/precision_choice.h"
#include "util/gpu_info.h"
#include "config/config.h"
#include "util/runtime.h"
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

// OpenBLAS's kernel set where its CPU tables fell back to one without AVX2: the newest the flags allow, by the
// instructions each set needs (SkylakeX: AVX-512 F/BW/VL/DQ/CD, with or without AVX512_BF16; Haswell: AVX2 and FMA);
// a core that is not a fallback, or a CPU with neither, is left as it is.
TEST(OpenBlasCore, AFallbackGetsTheNewestKernelsTheFlagsAllow) {
  const nlohmann::json avx512 = {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"};
  nlohmann::json with_bf16 = avx512;
  with_bf16.push_back("avx512_bf16");
  nlohmann::json no_cd = {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16"};
  const nlohmann::json avx2 = {"avx2", "fma"}, no_fma = {"avx2"}, none = nlohmann::json::array();
  for (const char* fallback : {"Prescott", "Nehalem", "Core2", "Sandybridge", "Barcelona"}) {
    EXPECT_EQ(poslab::openblas_core_for(fallback, with_bf16), "SkylakeX") << fallback;
    EXPECT_EQ(poslab::openblas_core_for(fallback, avx512), "SkylakeX") << fallback;
    EXPECT_EQ(poslab::openblas_core_for(fallback, no_cd), "Haswell") << fallback;  // not every AVX-512 part
    EXPECT_EQ(poslab::openblas_core_for(fallback, avx2), "Haswell") << fallback;
    EXPECT_EQ(poslab::openblas_core_for(fallback, no_fma), "") << fallback;
    EXPECT_EQ(poslab::openblas_core_for(fallback, none), "") << fallback;
  }
  for (const char* chosen : {"Haswell", "SkylakeX", "Cooperlake", "Zen", ""})
    EXPECT_EQ(poslab::openblas_core_for(chosen, with_bf16), "") << chosen;
}

// The timing behind train.precision "auto": both products timed (positive, finite), kept per shape and thread
// count, and the choice bf16 exactly where float takes at least kBf16Margin times as long.
TEST(PrecisionChoice, TimesBothProductsOnceAShapeAndChoosesByTheMargin) {
  const auto t = poslab::time_products(64, 32, 128);
  EXPECT_TRUE(std::isfinite(t.fp32_us) && t.fp32_us > 0) << t.fp32_us;
  EXPECT_TRUE(std::isfinite(t.bf16_us) && t.bf16_us > 0) << t.bf16_us;
  const auto again = poslab::time_products(64, 32, 128);
  EXPECT_EQ(again.fp32_us, t.fp32_us);
  EXPECT_EQ(again.bf16_us, t.bf16_us);
  for (double fp32 : {1.0, 10.0, 119.0, 120.0, 121.0, 500.0})
    EXPECT_EQ(poslab::bf16_pays({fp32, 100.0}), fp32 >= 120.0) << fp32;
}

// A CPU runtime flushes subnormal floats to zero in the calling thread and in the OpenMP workers that run a step's
// loops: 1e-30 * 1e-10 (1e-40, below float's smallest normal 1.18e-38) is 0 in each, and a subnormal read is 0.
TEST(Subnormals, FlushedInEveryThreadOfACpuRuntime) {
  poslab::Config c;
  c.device = "cpu";
  c.train.precision = "fp32";
  c.train.threads = 2;
  const auto product = [](float a, float b) {
    volatile float x = a, y = b;  // computed at run time, in this thread's mode
    return x * y;
  };
  const float subnormal = std::numeric_limits<float>::denorm_min() * 1000;
  // IEEE subnormals first, in every thread: an earlier test's runtime in this process has flushed them.
  const auto keep_subnormals = [] {
    at::parallel_for(0, at::get_num_threads(), 1, [](int64_t, int64_t) { at::globalContext().setFlushDenormal(false); });
    at::globalContext().setFlushDenormal(false);
  };
  keep_subnormals();
  ASSERT_GT(product(1e-30f, 1e-10f), 0.0f) << "this test expects IEEE subnormals before the runtime is made";
  const auto rt = poslab::make_runtime(c);
  std::vector<float> products(rt.threads, -1), reads(rt.threads, -1);
  std::vector<int> seen(rt.threads, 0);
  at::parallel_for(0, rt.threads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      products[i] = product(1e-30f, 1e-10f);
      reads[i] = product(subnormal, 1.0f);
      seen[i] = at::get_thread_num() + 1;
    }
  });
  EXPECT_EQ(product(1e-30f, 1e-10f), 0.0f);
  for (int i = 0; i < rt.threads; ++i) {
    EXPECT_EQ(products[i], 0.0f) << "thread " << i;
    EXPECT_EQ(reads[i], 0.0f) << "thread " << i;
  }
#ifdef _OPENMP
  EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), static_cast<size_t>(rt.threads)) << "not every worker ran";
#else
  // Built without OpenMP (clang's sanitizer build: LibTorch runs on GNU's libgomp), poslab's loops run on the
  // calling thread alone (CMakeLists.txt), which the checks above cover.
  EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), 1u);
#endif
  keep_subnormals();
}
