// Where and how a run computes: device (auto|cpu|cuda), precision (bf16 autocast or fp32) and
// the intra-op thread count, resolved once from the config and printed at start-up.
#pragma once
#include "util/torch_api.h"

#include <string>

#include "config/config.h"

namespace poslab {

struct Runtime {
  torch::Device device = torch::kCPU;
  bool bf16 = false;  // autocast matrix products to bfloat16
  double auto_bf16_speedup = 0;  // how "auto" chose on the CPU: bf16 products' speed over fp32's; 0 where not timed
  bool precision_kept = false;   // "auto" in a resumed run: the precision it started in, not a choice to change here
  int threads = 1;
  std::string threads_from;  // what set `threads`: "train.threads", "OMP_NUM_THREADS=N", or "" (the usable CPUs)
  int batch_shards = 1;  // > 1: each training batch is split over that many threads (CPU)
  bool fused_adamw = false;  // CPU: clipping + AdamW by fused_adamw_step
  bool fused_ops = false;    // CPU: GELU and LayerNorm by poslab's loops (model/fused_ops.h)
  std::string describe() const;
};

bool cpu_has_bf16();
// The CPU as benchmarks record it: vendor, family, model, model name, cores and the AVX2/AVX-512/AMX flags.
nlohmann::json cpu_info();
// cpu_info() in one line: "AMD EPYC (AuthenticAMD family 25 model 1, 2 usable cores; no AVX-512)", the flags
// named where they choose kernels (avx512f, the bf16 and AMX ones).
std::string describe_cpu(const nlohmann::json& cpu);
// The GPU of rt's device (util/gpu_info.h: name, memory, compute capability); null on the CPU.
nlohmann::json run_gpu_info(const Runtime& rt);
// The CPUs this process may use (util/affinity.h): what compare's jobs and data-parallel ranks divide.
int cpu_count();
// OMP_NUM_THREADS as OpenMP reads it (its first number), or 0 when unset or not a positive integer.
int omp_num_threads_env();
// The intra-op thread count poslab uses when train.threads is 0: OMP_NUM_THREADS where the user (or a launcher
// such as torchrun) set it, else one per CPU this process may use.
int default_threads();
// OpenBLAS (fp32 CPU matmuls) keeps its own thread pool. It runs single-threaded while batch shards
// call it from several threads at once, and whenever OpenMP workers spin (OMP_WAIT_POLICY=ACTIVE,
// poslab's default), since spinning workers starve its threads (measured 2-4x slower); otherwise it
// gets runtime.threads. Cheap to call every step: it acts only on a change. No-op with another BLAS.
void set_blas_threads(const Runtime& runtime, bool shards_running);
// The kernel set OpenBLAS runs fp32 matrix products with ("Haswell", "SkylakeX", ...; its own choice by
// CPU model, or OPENBLAS_CORETYPE's), or "" when the BLAS is not OpenBLAS. It sets what bf16 gains
// over fp32 on a machine (docs/benchmarks.md), so benchmarks record it beside the CPU.
std::string blas_core_name();
// The OPENBLAS_CORETYPE to start with where OpenBLAS, knowing CPUs by their model number, did not know this one
// and fell back to kernels older than the CPU (Debian 12's OpenBLAS 0.3.21 runs an Intel Xeon of family 6 model
// 207 on "Prescott", SSE3: fp32 products 4.7x slower than on the AVX-512 kernels the CPU runs): SkylakeX (AVX-512
// F/BW/VL/DQ/CD) or else Haswell (AVX2 with FMA), as `flags` (cpu_info()'s) allow; "" where `current` is not such a
// fallback, or the CPU has neither.
std::string openblas_core_for(const std::string& current, const nlohmann::json& flags);
// Whether the config's device resolves to CUDA here ("cuda", or "auto" with a CUDA device present).
bool runs_on_cuda(const Config& config);
// Resolves the config's choices and applies the thread count (intra-op and BLAS). Throws ConfigError for cuda without CUDA.
Runtime make_runtime(const Config& config);

// Enables bf16 autocast for the forward pass while alive (no-op when runtime.bf16 is false).
class AutocastGuard {
 public:
  explicit AutocastGuard(const Runtime& runtime);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_;
  bool cuda_;
};

}  // namespace poslab
