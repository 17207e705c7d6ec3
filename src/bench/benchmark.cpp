// Benchmark: time training steps exactly as the trainer runs them (same optimizer, autocast,
// threads), then evaluation forwards, then a square matmul for the machine's peak. Separately:
// generation with and without the KV cache.
#include "bench/benchmark.h"

#include <cmath>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "data/corpus.h"
#include "model/generate.h"
#include "model/gpt.h"
#include "train/schedule.h"
#include "train/trainer.h"
#include "util/gpu_info.h"
#include "util/runtime.h"

namespace poslab {
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double flops_per_token(int64_t params, const ModelConfig& m) {
  const double head_dim = static_cast<double>(m.n_embd) / m.n_head;
  return 6.0 * static_cast<double>(params) + 12.0 * m.n_layer * m.n_head * head_dim * m.block_size;
}

// N in nanoGPT's count: every parameter but the positional encoding's own (nanoGPT subtracts its position
// table, wpe; the tied token embedding stays, counted once as the output projection).
static int64_t flop_params(GPT& model) {
  int64_t n = model->num_params();
  for (const auto& p : model->pos->parameters()) n -= p.numel();
  return n;
}

static double peak_rss_mb() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;  // Linux reports KiB
}

// Bytes this process has read with read()/pread() so far (/proc/self/io rchar; memory-mapped pages
// are not counted): shows that opening a token file reads nothing of it once its ids are checked.
static double read_mb() {
  std::ifstream io("/proc/self/io");
  for (std::string key; io >> key;) {
    double v = 0;
    io >> v;
    if (key == "rchar:") return v / (1024.0 * 1024.0);
  }
  return -1;
}

static void sync(const Runtime& rt) {
  if (rt.device.is_cuda()) torch::cuda::synchronize();
}

// Peak of the matrix unit poslab's matmuls use: n x n products in the run's precision, run the way
// the training step runs them: with batch shards, one single-threaded product per shard thread at once.
static double matmul_gflops(const Runtime& rt) {
  const int64_t n = rt.device.is_cuda() ? 8192 : 1024;
  const bool sharded = rt.batch_shards > 1 && rt.device.is_cpu();
  const int64_t lanes = sharded ? rt.batch_shards : 1;
  set_blas_threads(rt, /*shards_running=*/sharded);
  auto dtype = rt.bf16 ? torch::kBFloat16 : torch::kFloat;
  std::vector<torch::Tensor> a, b;
  for (int64_t i = 0; i < lanes; ++i) {
    a.push_back(torch::randn({n, n}, torch::TensorOptions().device(rt.device)).to(dtype));
    b.push_back(torch::randn({n, n}, torch::TensorOptions().device(rt.device)).to(dtype));
  }
  auto products = [&](int reps) {
    if (!sharded) {
      for (int r = 0; r < reps; ++r) torch::matmul(a[0], b[0]);
      return;
    }
    at::parallel_for(0, lanes, /*grain_size=*/1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        for (int r = 0; r < reps; ++r) torch::matmul(a[i], b[i]);
    });
  };
  products(/*reps=*/2);  // warm-up
  sync(rt);
  int reps = 0;
  const auto start = Clock::now();
  double secs = 0;
  while (secs < 1.0) {
    products(/*reps=*/1);
    sync(rt);
    ++reps;
    secs = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return 2.0 * n * n * n * lanes * reps / secs / 1e9;
}

static double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
}

json run_benchmark(const Config& input, const BenchOptions& o) {
  Config c = input;
  auto corpus = make_corpus(c);
  c.model.vocab_size = static_cast<int>(corpus->tokenizer().size());
  Runtime rt = make_runtime(c);
  torch::manual_seed(c.seed);
  GPT model(c.model);
  model->to(rt.device);
  auto optimizer = make_optimizer(model, c.train);  // the trainer's own optimizer and step
  Rng rng(static_cast<uint64_t>(c.seed));
  std::vector<double> step_ms;
  int64_t tokens = 0;
  double train_s = 0;
  model->train();
  for (int64_t i = 0; i < static_cast<int64_t>(o.warmup) + o.steps; ++i) {
    auto batch = corpus->batch(Split::Train, c.train.batch_size, rng);
    const auto start = Clock::now();
    train_step(model, *optimizer, batch, learning_rate_at(c.train, i), c.train.grad_clip, rt);
    sync(rt);
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    if (i >= o.warmup) step_ms.push_back(secs * 1e3), tokens += batch.x.numel(), train_s += secs;
  }
  // Evaluation throughput: forward passes under inference mode, as `poslab eval` runs them.
  double eval_s = 0;
  int64_t eval_tokens = 0;
  {
    torch::InferenceMode guard;
    set_blas_threads(rt, /*shards_running=*/false);
    model->eval();
    for (int i = 0; i < std::max(2, o.steps / 2); ++i) {
      auto batch = corpus->batch(Split::Val, c.train.batch_size, rng);
      const auto start = Clock::now();
      AutocastGuard autocast(rt);
      auto logits = model->forward(batch.x.to(rt.device));
      sync(rt);
      if (i > 0) eval_s += std::chrono::duration<double>(Clock::now() - start).count(), eval_tokens += batch.x.numel();
    }
  }
  // The final validation loss on the trainer's fixed batches: a speed-up that costs accuracy shows here.
  LocalProcess one;
  const double val_loss = estimate_val_loss(model, *corpus, c, rt, one);
  // A run that diverged measured nothing a user would train: no figures (the trainer fails such a run too).
  if (!std::isfinite(val_loss)) {
    char lr[32];
    std::snprintf(lr, sizeof lr, "%g", c.train.learning_rate);
    throw std::runtime_error("bench: the validation loss is " + std::string(std::isnan(val_loss) ? "nan" : "inf") +
                             " after " + std::to_string(static_cast<int64_t>(o.warmup) + o.steps) +
                             " steps: training diverged (train.learning_rate " + lr + "), so no figures are reported");
  }
  const double peak = matmul_gflops(rt);
  const char* omp_wait_policy = std::getenv("OMP_WAIT_POLICY");
  const double tok_s = tokens / train_s;
  const int64_t n_flop = flop_params(model);
  const double achieved = flops_per_token(n_flop, c.model) * tok_s / 1e9;
  return {{"config", {{"n_layer", c.model.n_layer}, {"n_head", c.model.n_head}, {"n_embd", c.model.n_embd},
                      {"block_size", c.model.block_size}, {"batch_size", c.train.batch_size},
                      {"vocab_size", c.model.vocab_size}, {"pos_encoding", c.model.pos_encoding.kind}}},
          {"device", rt.device.is_cuda() ? "cuda" : "cpu"},
          {"cpu", cpu_info()},
          {"gpu", run_gpu_info(rt)},
          {"blas_core", blas_core_name()},
          {"libtorch", std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                           std::to_string(TORCH_VERSION_PATCH)},
          {"precision", rt.bf16 ? "bf16" : "fp32"},
          {"auto_bf16_speedup", rt.auto_bf16_speedup > 0 ? json(rt.auto_bf16_speedup) : json(nullptr)},
          {"threads", rt.threads},
          {"omp_wait_policy", omp_wait_policy ? omp_wait_policy : "unset"},
          {"batch_shards", rt.batch_shards},
          {"fused_adamw", rt.fused_adamw},
          {"fused_ops", rt.fused_ops},
          {"steps", o.steps},
          {"warmup", o.warmup},
          {"params", model->num_params()},
          {"flop_params", n_flop},
          {"train_tokens_per_s", tok_s},
          {"eval_tokens_per_s", eval_tokens / eval_s},
          {"val_loss", val_loss},
          {"ms_per_step_median", percentile(step_ms, 0.5)},
          {"ms_per_step_p90", percentile(step_ms, 0.9)},
          {"peak_rss_mb", peak_rss_mb()},
          {"read_mb", read_mb()},
          {"achieved_gflops", achieved},
          {"matmul_peak_gflops", peak},
          {"mfu", achieved / peak}};
}

std::string machine_lines(const json& r) {
  std::string out = r.contains("cpu") ? "  cpu    " + describe_cpu(r["cpu"]) + "\n" : "";
  if (r.contains("gpu") && r["gpu"].is_object()) out += "  gpu    " + describe_gpu(r["gpu"]) + "\n";
  return out;
}

// The fp32 kernels: OpenBLAS's choice by CPU model, or OPENBLAS_CORETYPE's; "" when the result has none.
static std::string blas_line(const json& r) {
  const std::string core = r.value("blas_core", std::string());
  return core.empty() ? "" : "  blas   OpenBLAS " + core + " kernels (fp32 matmuls)\n";
}

std::string format_benchmark(const json& r) {
  std::ostringstream out;
  // Where train.precision auto chose by timing the products: by how much.
  std::string auto_note;
  if (r.contains("auto_bf16_speedup") && r["auto_bf16_speedup"].is_number()) {
    char note[96];
    std::snprintf(note, sizeof note, " (auto: bf16 products %.2fx as fast as fp32's)", r["auto_bf16_speedup"].get<double>());
    auto_note = note;
  }
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "poslab bench: %s, %s%s, %d threads, batch in %d shards, %s AdamW, %lld params (%s)\n"
                "  train  %10.0f tok/s   step median %.1f ms, p90 %.1f ms\n"
                "  eval   %10.0f tok/s   val loss %.4f after %d steps\n"
                "  memory %10.1f MB peak RSS\n"
                "  flops  %10.2f GFLOP/s achieved, matmul peak %.1f GFLOP/s -> %.1f%% of peak\n",
                r["device"].get<std::string>().c_str(), r["precision"].get<std::string>().c_str(), auto_note.c_str(), r["threads"].get<int>(),
                r["batch_shards"].get<int>(), r["fused_adamw"].get<bool>() ? "fused" : "LibTorch", static_cast<long long>(r["params"].get<int64_t>()), r["config"]["pos_encoding"].get<std::string>().c_str(),
                r["train_tokens_per_s"].get<double>(), r["ms_per_step_median"].get<double>(),
                r["ms_per_step_p90"].get<double>(), r["eval_tokens_per_s"].get<double>(), r["val_loss"].get<double>(),
                r["steps"].get<int>() + r["warmup"].get<int>(), r["peak_rss_mb"].get<double>(),
                r["achieved_gflops"].get<double>(), r["matmul_peak_gflops"].get<double>(), 100 * r["mfu"].get<double>());
  out << buf << machine_lines(r) << blas_line(r);
  return out.str();
}

json run_generation_benchmark(const Config& input, int tokens) {
  Config c = input;
  auto corpus = make_corpus(c);
  c.model.vocab_size = static_cast<int>(corpus->tokenizer().size());
  Runtime rt = make_runtime(c);
  set_blas_threads(rt, /*shards_running=*/false);
  torch::manual_seed(c.seed);
  GPT model(c.model);
  model->to(rt.device);
  Rng rng(static_cast<uint64_t>(c.seed));
  auto x = corpus->batch(Split::Val, 1, rng).x[0];  // (T,)
  std::vector<int64_t> prompt(x.data_ptr<int64_t>(), x.data_ptr<int64_t>() + std::min<int64_t>(16, x.size(0)));
  json out = {{"config", {{"n_layer", c.model.n_layer}, {"n_embd", c.model.n_embd}, {"block_size", c.model.block_size},
                          {"pos_encoding", c.model.pos_encoding.kind}}},
              {"device", rt.device.is_cuda() ? "cuda" : "cpu"},
              {"cpu", cpu_info()},
              {"gpu", run_gpu_info(rt)},
              {"blas_core", blas_core_name()},
              {"threads", rt.threads},
              {"prompt_tokens", prompt.size()},
              {"tokens", tokens}};
  std::vector<int64_t> generated[2];
  for (bool cached : {true, false}) {
    GenerateStats stats;
    generate(model, prompt, GenerateOptions{4, 0.0, 0, cached});  // warm-up: allocations, thread pool
    sync(rt);
    const auto start = Clock::now();
    generated[cached] = generate(model, prompt, GenerateOptions{tokens, 0.0, 0, cached}, {}, &stats);
    sync(rt);
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    out[cached ? "cached" : "recompute"] = {
        {"tokens_per_s", tokens / secs}, {"cached_steps", stats.cached_steps}, {"recompute_steps", stats.recompute_steps}};
  }
  out["same_tokens"] = generated[0] == generated[1];
  return out;
}

std::string format_generation_benchmark(const json& r) {
  char buf[512];
  const auto &a = r["cached"], &b = r["recompute"];
  std::snprintf(buf, sizeof buf,
                "poslab bench --generate: %s, %d threads, %s, %lld tokens after a %lld-token prompt (block_size %d)\n"
                "  kv cache   %10.1f tok/s   (%lld steps from the cache, %lld by recompute where the encoding allows none)\n"
                "  recompute  %10.1f tok/s   -> cache speed-up %.2fx, same tokens: %s\n",
                r["device"].get<std::string>().c_str(), r["threads"].get<int>(),
                r["config"]["pos_encoding"].get<std::string>().c_str(), static_cast<long long>(r["tokens"].get<int64_t>()),
                static_cast<long long>(r["prompt_tokens"].get<int64_t>()), r["config"]["block_size"].get<int>(),
                a["tokens_per_s"].get<double>(), static_cast<long long>(a["cached_steps"].get<int64_t>()),
                static_cast<long long>(a["recompute_steps"].get<int64_t>()), b["tokens_per_s"].get<double>(),
                a["tokens_per_s"].get<double>() / b["tokens_per_s"].get<double>(), r["same_tokens"].get<bool>() ? "yes" : "NO");
  return buf + machine_lines(r) + blas_line(r);
}

}  // namespace poslab
