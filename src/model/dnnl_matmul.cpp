// bf16_mm on oneDNN: a per-thread cache of matmul primitives keyed by shape, strides and types, their
// memory objects re-pointed at each call's tensors, and a per-thread scratchpad. Without oneDNN (other
// LibTorch builds) the same products through LibTorch.
#include "model/dnnl_matmul.h"

#if POSLAB_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include <array>
#include <vector>

namespace poslab {

#if POSLAB_DNNL && DNNL_VERSION_MAJOR == 2
namespace {

using dnnl::memory;

memory::data_type dnnl_type(c10::ScalarType t) {
  return t == torch::kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
}

// A matrix oneDNN's blocked kernels take as it is: one of its dimensions has unit stride.
bool plain(const torch::Tensor& t) {
  return (t.stride(1) == 1 && t.stride(0) >= t.size(1)) || (t.stride(0) == 1 && t.stride(1) >= t.size(0));
}

struct Key {
  std::array<int64_t, 7> dims;  // M, K, N, a's two strides, b's two strides
  int types;                     // out type and bias type (0 = none)
  bool operator==(const Key& o) const { return dims == o.dims && types == o.types; }
};

struct Entry {
  Key key;
  dnnl::matmul prim;
  memory a, b, c, bias, scratch;
};

struct ThreadCache {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::vector<Entry> entries;  // a training step has ~20 shapes; evaluation at many lengths, more
  torch::Tensor scratchpad = torch::empty({0}, torch::kByte);
};

ThreadCache& cache() {
  thread_local ThreadCache c;
  return c;
}

Entry& entry_for(ThreadCache& tc, const torch::Tensor& a, const torch::Tensor& b, c10::ScalarType out_type,
                 const torch::Tensor& bias) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const Key key{{M, K, N, a.stride(0), a.stride(1), b.stride(0), b.stride(1)},
                static_cast<int>(out_type) * 64 + (bias.defined() ? 1 + static_cast<int>(bias.scalar_type()) : 0)};
  for (auto& e : tc.entries)
    if (e.key == key) return e;
  if (tc.entries.size() >= 256) tc.entries.clear();  // lengths without end (probes): start over
  const memory::desc a_md({M, K}, memory::data_type::bf16, {a.stride(0), a.stride(1)});
  const memory::desc b_md({K, N}, memory::data_type::bf16, {b.stride(0), b.stride(1)});
  const memory::desc c_md({M, N}, dnnl_type(out_type), {N, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // one buffer per thread, not one malloc per call
  const memory::desc bias_md = bias.defined() ? memory::desc({1, N}, dnnl_type(bias.scalar_type()), {N, 1}) : memory::desc();
  const auto desc = bias.defined() ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md) : dnnl::matmul::desc(a_md, b_md, c_md);
  const dnnl::matmul::primitive_desc pd(desc, attr, tc.engine);
  Entry e{key, dnnl::matmul(pd), memory(a_md, tc.engine, nullptr), memory(b_md, tc.engine, nullptr),
          memory(c_md, tc.engine, nullptr), memory(), memory(pd.scratchpad_desc(), tc.engine, nullptr)};
  if (bias.defined()) e.bias = memory(bias_md, tc.engine, nullptr);
  tc.entries.push_back(std::move(e));
  return tc.entries.back();
}

bool cpu_has_bf16_kernels() {
  static const bool has = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512dq");
  return has;
}

}  // namespace

bool dnnl_matmul_active() { return cpu_has_bf16_kernels(); }

torch::Tensor bf16_mm(const torch::Tensor& a_in, const torch::Tensor& b_in, c10::ScalarType out_type,
                      const torch::Tensor& bias) {
  TORCH_CHECK(a_in.dim() == 2 && b_in.dim() == 2 && a_in.size(1) == b_in.size(0), "bf16_mm: (M, K) by (K, N) expected");
  if (!cpu_has_bf16_kernels()) {
    auto y = bias.defined() ? at::addmm(bias.to(torch::kBFloat16), a_in, b_in) : at::mm(a_in, b_in);
    return y.to(out_type);
  }
  const auto a = plain(a_in) ? a_in : a_in.contiguous();
  const auto b = plain(b_in) ? b_in : b_in.contiguous();
  const auto bias_c = bias.defined() ? bias.contiguous() : bias;
  auto c = torch::empty({a.size(0), b.size(1)}, torch::TensorOptions().dtype(out_type));
  if (c.numel() == 0) return c;
  if (a.size(1) == 0) return bias.defined() ? c.copy_(bias_c.expand_as(c)) : c.zero_();
  auto& tc = cache();
  auto& e = entry_for(tc, a, b, out_type, bias_c);
  const size_t scratch_bytes = e.scratch.get_desc().get_size();
  if (static_cast<size_t>(tc.scratchpad.numel()) < scratch_bytes)
    tc.scratchpad = torch::empty({static_cast<int64_t>(scratch_bytes)}, torch::kByte);
  e.a.set_data_handle(a.data_ptr());
  e.b.set_data_handle(b.data_ptr());
  e.c.set_data_handle(c.data_ptr());
  e.scratch.set_data_handle(tc.scratchpad.data_ptr());
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}, {DNNL_ARG_SCRATCHPAD, e.scratch}};
  if (bias.defined()) {
    e.bias.set_data_handle(bias_c.data_ptr());
    args.emplace(DNNL_ARG_BIAS, e.bias);
  }
  e.prim.execute(tc.stream, args);
  return c;
}

#else

bool dnnl_matmul_active() { return false; }

torch::Tensor bf16_mm(const torch::Tensor& a, const torch::Tensor& b, c10::ScalarType out_type, const torch::Tensor& bias) {
  auto y = bias.defined() ? at::addmm(bias.to(torch::kBFloat16), a, b) : at::mm(a, b);
  return y.to(out_type);
}

#endif

}  // namespace poslab
