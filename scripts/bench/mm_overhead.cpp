// What LibTorch's path adds to a bfloat16 matrix product: at::mm against the same oneDNN matmul primitive created
// once and executed on the same pointers, one thread, warm operands (docs/benchmarks.md, "Matrix products on oneDNN
// directly"). Needs Debian's LibTorch 1.13 and libdnnl-dev (oneDNN 2.x, the library that LibTorch links):
//   g++ -O2 -std=c++17 scripts/bench/mm_overhead.cpp -o /tmp/mm_overhead -I/usr/include/torch/csrc/api/include \
//       -ltorch -ltorch_cpu -lc10 -ldnnl && OMP_NUM_THREADS=1 /tmp/mm_overhead
#include <torch/torch.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <chrono>
#include <cstdio>

using namespace dnnl;

template <class F>
double micros_per_call(F f, int reps) {
  for (int i = 0; i < 200; ++i) f();  // warm-up: caches, kernels, the allocator
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps * 1e6;
}

int main() {
  torch::set_num_threads(1);
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const int64_t shapes[][3] = {{384, 128, 512}, {384, 512, 128}, {384, 128, 384}, {384, 128, 128}, {128, 384, 512}};
  for (const auto& sh : shapes) {
    const int64_t M = sh[0], K = sh[1], N = sh[2];
    auto a = torch::randn({M, K}).to(torch::kBFloat16), w = torch::randn({N, K}).to(torch::kBFloat16);
    const double libtorch = micros_per_call([&] { return at::mm(a, w.t()); }, 2000);
    // The same product as a Linear's: a (M, K) times w (N, K) transposed, read in place.
    memory::desc ad({M, K}, memory::data_type::bf16, memory::format_tag::ab);
    memory::desc wd({K, N}, memory::data_type::bf16, memory::format_tag::ba);
    memory::desc cd({M, N}, memory::data_type::bf16, memory::format_tag::ab);
    primitive_attr attr;
    attr.set_scratchpad_mode(scratchpad_mode::user);
    matmul::primitive_desc pd(matmul::desc(ad, wd, cd), attr, eng);
    matmul prim(pd);
    auto scratch = torch::empty({static_cast<int64_t>(pd.scratchpad_desc().get_size())}, torch::kByte);
    const double direct = micros_per_call(
        [&] {
          auto c = torch::empty({M, N}, torch::kBFloat16);
          memory am(ad, eng, a.data_ptr()), wm(wd, eng, w.data_ptr()), cm(cd, eng, c.data_ptr()),
              sm(pd.scratchpad_desc(), eng, scratch.data_ptr());
          prim.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, sm}});
          return c;
        },
        2000);
    const double describe = micros_per_call([&] { matmul::primitive_desc(matmul::desc(ad, wd, cd), attr, eng); }, 200);
    std::printf("%4lld x %4lld x %4lld   at::mm %6.1f us   oneDNN primitive %6.1f us   creating its descriptor %4.1f us\n",
                static_cast<long long>(M), static_cast<long long>(K), static_cast<long long>(N), libtorch, direct, describe);
  }
}
