// Device, precision and threads. Autocast's C++ API changed in LibTorch 2.4; both are handled.
#include "util/runtime.h"

#include <ATen/autocast_mode.h>

#include <cstdlib>
#include <fstream>
#include <thread>

namespace poslab {

bool cpu_has_bf16() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) return line.find("avx512_bf16") != std::string::npos || line.find("amx_bf16") != std::string::npos;
  return false;
}

int default_threads(bool bf16, bool cuda) {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const bool spinning = policy == nullptr || std::string(policy) == "ACTIVE" || std::string(policy) == "active";
  if (!bf16 && !cuda && spinning) return 1;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

Runtime make_runtime(const Config& config) {
  Runtime rt;
  const bool cuda = torch::cuda::is_available();
  if (config.device == "cuda" && !cuda) throw ConfigError("device: cuda was asked for but no CUDA device is available");
  rt.device = (config.device == "cuda" || (config.device == "auto" && cuda)) ? torch::Device(torch::kCUDA)
                                                                             : torch::Device(torch::kCPU);
  const auto& p = config.train.precision;
  if (p == "bf16" && rt.device.is_cpu() && !cpu_has_bf16())
    throw ConfigError("train.precision: bf16 needs a CPU with AVX512_BF16 or AMX; use fp32 or auto");
  rt.bf16 = p == "bf16" || (p == "auto" && (rt.device.is_cuda() || cpu_has_bf16()));
  rt.threads = config.train.threads > 0 ? config.train.threads : default_threads(rt.bf16, rt.device.is_cuda());
  torch::set_num_threads(rt.threads);
  if (rt.device.is_cuda()) {
    at::globalContext().setAllowTF32CuBLAS(true);
    at::globalContext().setAllowTF32CuDNN(true);
  }
  return rt;
}

std::string Runtime::describe() const {
  return std::string("device ") + (device.is_cuda() ? "cuda" : "cpu") + ", precision " +
         (bf16 ? "bf16 autocast (set train.precision=fp32 to turn off)" : "fp32") + ", " + std::to_string(threads) +
         " thread" + (threads == 1 ? "" : "s") + " (OMP_WAIT_POLICY=" +
         (std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "unset") + ")";
}

AutocastGuard::AutocastGuard(const Runtime& rt) : active_(rt.bf16), cuda_(rt.device.is_cuda()) {
  if (!active_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  const auto type = cuda_ ? at::kCUDA : at::kCPU;
  at::autocast::set_autocast_dtype(type, at::kBFloat16);
  at::autocast::set_autocast_enabled(type, true);
#else
  if (cuda_) {
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    at::autocast::set_enabled(true);
  } else {
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(true);
  }
#endif
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  at::autocast::set_autocast_enabled(cuda_ ? at::kCUDA : at::kCPU, false);
#else
  if (cuda_) at::autocast::set_enabled(false);
  else at::autocast::set_cpu_enabled(false);
#endif
  at::autocast::clear_cache();  // cached bf16 weight copies are stale after the optimizer step
}

}  // namespace poslab
