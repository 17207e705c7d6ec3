// bf16_matmul on oneDNN: a per-thread cache of matmul primitives keyed by sizes, strides and types, their
// memory objects re-pointed at each call's tensors, and a per-thread scratchpad. Without oneDNN (other
// LibTorch builds) the same products through LibTorch.
#include "model/dnnl_matmul.h"

#include "poslab_dnnl.h"  // POSLAB_DNNL, from the build's configuration (CMakeLists.txt)

#if POSLAB_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include <vector>

namespace poslab {

static torch::Tensor result_for(const torch::Tensor& a, const torch::Tensor& b, c10::ScalarType out_type,
                                const torch::Tensor& out) {
  auto sizes = a.sizes().vec();
  sizes.back() = b.size(-1);
  if (!out.defined()) return torch::empty(sizes, torch::TensorOptions().dtype(out_type));
  TORCH_CHECK(out.sizes() == at::IntArrayRef(sizes) && out.scalar_type() == out_type && out.stride(-1) == 1,
              "bf16_matmul: out must be ", at::IntArrayRef(sizes), " of ", out_type, " with contiguous rows");
  return out;
}

// LibTorch's bfloat16 product, rounded to bfloat16 as autocast's is, then widened where float is asked; the bias
// added in the output's type.
static torch::Tensor libtorch_matmul(const torch::Tensor& a, const torch::Tensor& b, c10::ScalarType out_type,
                                     const torch::Tensor& bias, const torch::Tensor& out) {
  auto y = at::matmul(a, b).to(out_type);
  if (bias.defined()) y = y + bias.to(out_type);
  if (!out.defined()) return y;
  return result_for(a, b, out_type, out).copy_(y);
}

#if POSLAB_DNNL && DNNL_VERSION_MAJOR == 2
namespace {

using dnnl::memory;

memory::data_type dnnl_type(c10::ScalarType t) {
  return t == torch::kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
}

// An operand oneDNN's blocked kernels read as it is (others take slower ones): densely packed, its last
// two dimensions in either order. A batch of rows a larger stride apart (q sliced out of q, k, v) is not.
bool dense(const torch::Tensor& t) {
  if (t.is_contiguous()) return true;
  return t.transpose(-2, -1).is_contiguous();
}

memory::desc desc_of(const torch::Tensor& t, memory::data_type type) {
  return memory::desc(t.sizes().vec(), type, t.strides().vec());
}

struct Entry {
  std::vector<int64_t> key;  // sizes and strides of a, b and c, the types
  dnnl::matmul prim;
  memory a, b, c, bias, scratch;
};

struct ThreadCache {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::vector<Entry> entries;  // a training step has ~25 shapes; evaluation at many lengths, more
  torch::Tensor scratchpad = torch::empty({0}, torch::kByte);
};

ThreadCache& cache() {
  thread_local ThreadCache c;
  return c;
}

std::vector<int64_t> key_of(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c,
                            const torch::Tensor& bias) {
  std::vector<int64_t> key;
  for (const auto* t : {&a, &b, &c}) {
    key.push_back(t->dim());
    key.insert(key.end(), t->sizes().begin(), t->sizes().end());
    key.insert(key.end(), t->strides().begin(), t->strides().end());
  }
  key.push_back(static_cast<int64_t>(c.scalar_type()));
  key.push_back(bias.defined() ? 1 + static_cast<int64_t>(bias.scalar_type()) : 0);
  return key;
}

Entry& entry_for(ThreadCache& tc, const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c,
                 const torch::Tensor& bias) {
  auto key = key_of(a, b, c, bias);
  for (auto& e : tc.entries)
    if (e.key == key) return e;
  if (tc.entries.size() >= 256) tc.entries.clear();  // lengths without end (probes): start over
  const auto a_md = desc_of(a, memory::data_type::bf16), b_md = desc_of(b, memory::data_type::bf16);
  const auto c_md = desc_of(c, dnnl_type(c.scalar_type()));
  memory::desc bias_md;
  if (bias.defined()) {
    std::vector<int64_t> dims(c.dim(), 1), strides(c.dim(), c.size(-1));
    dims.back() = c.size(-1), strides.back() = 1;
    bias_md = memory::desc(dims, dnnl_type(bias.scalar_type()), strides);
  }
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // one buffer per thread, not one malloc per call
  const auto desc = bias.defined() ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md) : dnnl::matmul::desc(a_md, b_md, c_md);
  const dnnl::matmul::primitive_desc pd(desc, attr, tc.engine);
  Entry e{std::move(key), dnnl::matmul(pd), memory(a_md, tc.engine, nullptr), memory(b_md, tc.engine, nullptr),
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

torch::Tensor bf16_matmul(const torch::Tensor& a_in, const torch::Tensor& b_in, c10::ScalarType out_type,
                          const torch::Tensor& bias, torch::Tensor out) {
  TORCH_CHECK(a_in.dim() >= 2 && a_in.dim() <= 4 && b_in.dim() == a_in.dim() && a_in.size(-1) == b_in.size(-2) &&
                  a_in.sizes().slice(0, a_in.dim() - 2) == b_in.sizes().slice(0, b_in.dim() - 2),
              "bf16_matmul: (..., M, K) by (..., K, N) with the same batch dimensions expected, got ", a_in.sizes(),
              " and ", b_in.sizes());
  if (!cpu_has_bf16_kernels()) return libtorch_matmul(a_in, b_in, out_type, bias, out);
  const auto a = dense(a_in) ? a_in : a_in.contiguous();
  const auto b = dense(b_in) ? b_in : b_in.contiguous();
  const auto bias_c = bias.defined() ? bias.contiguous() : bias;
  auto c = result_for(a, b, out_type, out);
  if (c.numel() == 0) return c;
  // oneDNN 2.6's brgemm kernels (AMX, AVX512_BF16) write only a dense output, whose strides order a contiguous
  // tensor's (rows of heads, (B, T, H, hs) seen as (B, H, T, hs), are dense): into the views of a wider buffer
  // (one of q, k and v's gradients in (B, T, 3C), a block of rows) oneDNN ran gemm:jit, 2-5x slower (at the
  // main job's attention shapes 0.16 against 0.05 ms with AMX; docs/benchmarks.md). Such an out takes the
  // product from a dense tensor.
  if (!c.is_non_overlapping_and_dense()) return c.copy_(bf16_matmul(a, b, out_type, bias));
  if (a.size(-1) == 0) return bias.defined() ? c.copy_(bias_c.expand_as(c)) : c.zero_();
  auto& tc = cache();
  auto& e = entry_for(tc, a, b, c, bias_c);
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

torch::Tensor bf16_matmul(const torch::Tensor& a, const torch::Tensor& b, c10::ScalarType out_type,
                          const torch::Tensor& bias, torch::Tensor out) {
  return libtorch_matmul(a, b, out_type, bias, out);
}

#endif

}  // namespace poslab
