// Device, precision and threads. Autocast's C++ API changed in LibTorch 2.4; both are handled.
#include "util/runtime.h"

#include <ATen/autocast_mode.h>

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <thread>

#include "model/fused_ops.h"
#include "model/precision_choice.h"
#include "util/affinity.h"
#include "util/gpu_info.h"

namespace poslab {

nlohmann::json cpu_info() {
  // The fields of /proc/cpuinfo's first processor that tell machines of one kind apart; "unknown" off Linux.
  nlohmann::json out = {{"vendor", "unknown"}, {"family", "unknown"}, {"model", "unknown"}, {"model_name", "unknown"},
                        {"cores", cpu_count()}, {"flags", nlohmann::json::array()}};
  std::ifstream in("/proc/cpuinfo");
  const std::pair<const char*, const char*> keys[] = {
      {"vendor_id", "vendor"}, {"cpu family", "family"}, {"model", "model"}, {"model name", "model_name"}};
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) {
      if (line.empty() && out["model_name"] != "unknown") break;  // the first processor only
      continue;
    }
    std::string key = line.substr(0, colon), value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    for (const auto& [from, to] : keys)
      if (key == from) out[to] = value;
    if (key == "flags") {
      // Only the flags that change which kernels run: AVX2, AVX-512, bf16 and AMX.
      std::istringstream words(value);
      for (std::string w; words >> w;)
        if (w == "avx2" || w == "fma" || w.rfind("avx512", 0) == 0 || w.rfind("amx", 0) == 0) out["flags"].push_back(w);
    }
  }
  return out;
}

std::string describe_cpu(const nlohmann::json& cpu) {
  std::string flags;
  for (const auto& f : cpu.value("flags", nlohmann::json::array())) {
    const auto name = f.get<std::string>();
    if (name == "avx512f" || name.find("bf16") != std::string::npos || name.rfind("amx", 0) == 0)
      flags += (flags.empty() ? "" : " ") + name;
  }
  return cpu.value("model_name", std::string("unknown")) + " (" + cpu.value("vendor", std::string("unknown")) +
         " family " + cpu.value("family", std::string("?")) + " model " + cpu.value("model", std::string("?")) + ", " +
         std::to_string(cpu.value("cores", 0)) + " usable cores; " + (flags.empty() ? "no AVX-512" : flags) + ")";
}

nlohmann::json run_gpu_info(const Runtime& rt) {
  return rt.device.is_cuda() ? gpu_info(rt.device.has_index() ? rt.device.index() : 0) : nlohmann::json(nullptr);
}

bool cpu_has_bf16() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) return line.find("avx512_bf16") != std::string::npos || line.find("amx_bf16") != std::string::npos;
  return false;
}

static bool omp_workers_spin() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  return policy == nullptr || std::string(policy) == "ACTIVE" || std::string(policy) == "active";
}

// Under `taskset -c 0` (or a cgroup's cpuset) one CPU on a machine of many, where spinning workers on one core
// would take turns at it.
int cpu_count() { return static_cast<int>(usable_cpus().size()); }

int omp_num_threads_env() {
  const char* text = std::getenv("OMP_NUM_THREADS");
  if (text == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(text, &end, 10);  // "4,2" (a count per nesting level): the outer one
  return end != text && (*end == '\0' || *end == ',') && n > 0 && n <= kMaxThreads ? static_cast<int>(n) : 0;
}

int default_threads() {
  const int from_env = omp_num_threads_env();
  return from_env > 0 ? from_env : cpu_count();
}

void set_blas_threads(const Runtime& rt, bool shards_running) {
  // Debian's LibTorch reaches OpenBLAS through the libblas.so.3 alternative: look it up at run time.
  using Setter = void (*)(int);
  static const auto set = reinterpret_cast<Setter>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  static int current = 0;
  const int n = (shards_running || omp_workers_spin()) ? 1 : rt.threads;
  if (!set || n == current) return;  // a change wakes or parks OpenBLAS's pool: only on change
  set(n);
  current = n;
}

std::string blas_core_name() {
  using Getter = char* (*)();
  static const auto get = reinterpret_cast<Getter>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = get ? get() : nullptr;
  return name ? name : "";
}

std::string openblas_core_for(const std::string& current, const nlohmann::json& flags) {
  // OpenBLAS's kernels for CPUs without AVX2: what its model tables give a CPU they lack.
  static const char* const fallbacks[] = {"Katmai", "Coppermine", "Northwood", "Prescott", "Banias", "Atom", "Core2",
                                          "Penryn", "Dunnington", "Nehalem", "Sandybridge", "Opteron", "Opteron_SSE3",
                                          "Barcelona", "Bobcat", "Bulldozer", "Piledriver", "Steamroller", "Excavator"};
  if (std::find(std::begin(fallbacks), std::end(fallbacks), current) == std::end(fallbacks)) return "";
  const auto has = [&](const char* f) { return std::find(flags.begin(), flags.end(), f) != flags.end(); };
  const bool avx512 = has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq") && has("avx512cd");
  // SkylakeX, not Cooperlake, for every AVX-512 CPU: the two run fp32 products on the same kernels (33.1k and 33.0k
  // against 32.9k and 33.5k tokens/s, alternated), and 0.3.21 does not take "Cooperlake" as OPENBLAS_CORETYPE
  // ("Core not found", then its own choice).
  if (avx512) return "SkylakeX";
  if (has("avx2") && has("fma")) return "Haswell";
  return "";
}

// Shards pay off where one batch's kernels are too small to keep every core busy, as with poslab's
// small models on a CPU: measured 1.3-1.4x (bf16) and 1.4-1.8x (fp32) on 2 cores (docs/benchmarks.md).
static int resolve_batch_shards(const Config& config, const Runtime& rt) {
  const auto& t = config.train;
  if (rt.device.is_cuda()) {
    if (t.batch_shards > 1) throw ConfigError("train.batch_shards: only for the CPU; use 0 or 1 with device cuda");
    return 1;
  }
  if (t.batch_shards > 0) return t.batch_shards;
#ifndef _OPENMP
  return 1;  // built without OpenMP: shards would run one after the other (see CMakeLists.txt)
#endif
  const bool auto_on = config.model.dropout == 0 && rt.threads >= 2 && t.batch_size >= rt.threads;
  return auto_on ? rt.threads : 1;
}

// Subnormal floats (below 1.2e-38) read or written as zero, in this thread and in every OpenMP worker that runs the
// step (batch shards, oneDNN's and LibTorch's loops, where poslab is built with OpenMP; a worker keeps its setting), as torch.set_flush_denormal(True)
// does for one thread. On an Intel core each subnormal operand costs a microcode assist: a main-job cell whose
// activations or optimizer state drifted into that range trained 3.2x slower, in fp32, than with them flushed
// (docs/benchmarks.md). Values that small carry nothing a step uses; bfloat16 has the same exponent range.
static void flush_subnormals(int threads) {
  at::globalContext().setFlushDenormal(true);
  at::parallel_for(0, threads, /*grain_size=*/1,
                   [](int64_t, int64_t) { at::globalContext().setFlushDenormal(true); });
}

// "auto" on a CPU with bfloat16 instructions: bfloat16 where its products outrun float's at the model's largest
// product (the MLP's, over a batch shard's rows, at most 512 of them: a large model's start-up pays ~0.3 s, not
// seconds), on one thread as a shard runs it.
static void choose_cpu_precision(const Config& config, Runtime& rt) {
  const auto& m = config.model;
  const int64_t rows = std::clamp<int64_t>(
      static_cast<int64_t>(config.train.batch_size) / std::max(1, rt.batch_shards) * m.block_size, 1, 512);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  set_blas_threads(rt, /*shards_running=*/true);  // one OpenBLAS thread: the products run in this one
  const ProductTiming t = time_products(rows, m.n_embd, 4 * static_cast<int64_t>(m.n_embd));
  at::set_num_threads(threads);
  set_blas_threads(rt, /*shards_running=*/false);
  rt.bf16 = bf16_pays(t);
  rt.auto_bf16_speedup = t.speedup();
}

bool runs_on_cuda(const Config& config) {
  return config.device == "cuda" || (config.device == "auto" && torch::cuda::is_available());
}

Runtime make_runtime(const Config& config) {
  Runtime rt;
  if (config.device == "cuda" && !torch::cuda::is_available())
    throw ConfigError("device: cuda was asked for but no CUDA device is available");
  rt.device = runs_on_cuda(config) ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  const auto& p = config.train.precision;
  if (p == "bf16" && rt.device.is_cpu() && !cpu_has_bf16())
    throw ConfigError("train.precision: bf16 needs a CPU with AVX512_BF16 or AMX; use fp32 or auto");
  rt.bf16 = p == "bf16" || (p == "auto" && rt.device.is_cuda());
  rt.threads = config.train.threads > 0 ? config.train.threads : default_threads();
  rt.threads_from = config.train.threads > 0     ? "train.threads"
                    : omp_num_threads_env() > 0 ? "OMP_NUM_THREADS=" + std::string(std::getenv("OMP_NUM_THREADS"))
                                                : "";
  // More threads than CPUs take turns at them, and spinning OpenMP workers wait for parked ones: several
  // times slower, not faster (docs/benchmarks.md). Said once per process.
  static bool warned = false;
  if (rt.device.is_cpu() && rt.threads > cpu_count() && !warned) {
    warned = true;
    spdlog::warn("{}: {} threads on {} usable CPU{}: threads beyond the CPUs take turns at them and slow training "
                 "down; {} or fewer is faster",
                 rt.threads_from.empty() ? "threads" : rt.threads_from, rt.threads, cpu_count(),
                 cpu_count() == 1 ? "" : "s", cpu_count());
  }
  torch::set_num_threads(rt.threads);
  set_blas_threads(rt, /*shards_running=*/false);
  if (rt.device.is_cpu()) flush_subnormals(rt.threads);
  rt.batch_shards = resolve_batch_shards(config, rt);
  if (p == "auto" && rt.device.is_cpu() && cpu_has_bf16()) choose_cpu_precision(config, rt);
  rt.fused_adamw = config.train.fused_adamw && rt.device.is_cpu();
  rt.fused_ops = config.train.fused_ops && rt.device.is_cpu();
  set_fused_ops(rt.fused_ops);  // process-wide, like the thread count: the model reads it in every forward
  if (rt.device.is_cuda()) {
    at::globalContext().setAllowTF32CuBLAS(true);
    at::globalContext().setAllowTF32CuDNN(true);
  }
  return rt;
}

std::string Runtime::describe() const {
  std::ostringstream timed;
  if (auto_bf16_speedup > 0)
    timed << std::fixed << std::setprecision(2) << "auto: bf16 products " << auto_bf16_speedup << "x as fast as fp32's here; ";
  const std::string why = timed.str();
  const std::string blas = device.is_cpu() && !blas_core_name().empty() ? "on OpenBLAS's " + blas_core_name() + " kernels; " : "";
  const std::string precision =
      precision_kept ? (bf16 ? "bf16 autocast (auto, as the run started)" : "fp32 (auto, as the run started)")
      : bf16         ? "bf16 autocast (" + why + "set train.precision=fp32 to turn off)"
                     : "fp32 (" + why + blas + "set train.precision=bf16 " + (why.empty() ? "for bf16 autocast" : "to use them") + ")";
  return std::string("device ") + (device.is_cuda() ? "cuda" : "cpu") + ", precision " + precision
         + ", " + std::to_string(threads) +
         " thread" + (threads == 1 ? "" : "s") + " (" +
         (threads_from.empty() ? "" : threads_from + ", ") +
         "OMP_WAIT_POLICY=" +
         (std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "unset") + ")" +
         (batch_shards > 1 ? ", each batch split over " + std::to_string(batch_shards) + " threads" : "") +
         (fused_adamw ? ", fused AdamW" : "") +
         (fused_ops ? ", fused GELU, LayerNorm and attention softmax (and rotary kinds' rotation)" : "");
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
