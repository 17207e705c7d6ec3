// Fused CPU AdamW: pass 1 sums shard gradients and their squares, pass 2 clips and updates (and writes
// the parameter's next bfloat16 copy where one is kept), each over fixed-size chunks of every parameter
// run in parallel. The arithmetic per element follows
// torch::optim::AdamW::step of LibTorch 1.13 (decoupled decay, then moments, then
// p += -lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps)), so the two paths agree to float rounding.
#include "train/fused_adamw.h"
#include "train/adamw_kernels.h"

#include "model/bf16_weights.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <sstream>
#include <type_traits>

namespace poslab {
namespace {

using StateMap = std::remove_reference_t<decltype(std::declval<torch::optim::AdamW&>().state())>;

// The optimizer's key for a parameter's state: the TensorImpl address, printed (LibTorch 1.x) or
// raw (2.x). Chosen by the map's key type, so the same source builds against both.
template <typename Key>
Key state_key(const torch::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream out;
    out << static_cast<const void*>(p.unsafeGetTensorImpl());
    return out.str();
  } else {
    return static_cast<Key>(p.unsafeGetTensorImpl());
  }
}

// Elements per unit of parallel work: small enough to balance two cores over a 0.8M-parameter
// model, large enough that scheduling costs nothing next to the arithmetic.
constexpr int64_t kChunk = 16384;

struct Chunk {
  size_t param;
  int64_t begin, end;
};

struct ParamSlot {
  torch::Tensor param, grad;  // grad: the summed gradient (fp32, contiguous)
  torch::Tensor param_bf16;   // the parameter's next bfloat16 copy (model/bf16_weights.h), where it has one
  torch::optim::AdamWParamState* state;
  const torch::optim::AdamWOptions* options;
};

}  // namespace

std::vector<torch::Tensor> optimizer_params(const torch::optim::AdamW& optimizer) {
  std::vector<torch::Tensor> params;
  for (const auto& group : optimizer.param_groups())
    for (const auto& p : group.params()) params.push_back(p);
  return params;
}

bool fused_adamw_applies(const torch::optim::AdamW& optimizer) {
  for (const auto& group : optimizer.param_groups()) {
    if (static_cast<const torch::optim::AdamWOptions&>(group.options()).amsgrad()) return false;
    for (const auto& p : group.params())
      if (!p.device().is_cpu() || p.scalar_type() != torch::kFloat || !p.is_contiguous()) return false;
  }
  return true;
}

void fused_adamw_step(torch::optim::AdamW& optimizer, const std::vector<std::vector<torch::Tensor>>& shard_grads,
                      double grad_clip) {
  torch::NoGradGuard no_grad;
  auto& states = optimizer.state();
  using Key = typename StateMap::key_type;

  // Serial set-up: gradient buffers, state lookup (and creation, as AdamW does on a first step).
  std::vector<ParamSlot> slots;
  std::vector<std::vector<torch::Tensor>> sources;  // per slot: the shards' gradients in order (none: grad is the only one)
  size_t k = 0;
  for (auto& group : optimizer.param_groups()) {
    const auto* options = &static_cast<const torch::optim::AdamWOptions&>(group.options());
    for (auto& p : group.params()) {
      std::vector<torch::Tensor> parts;
      for (const auto& shard : shard_grads)
        if (shard[k].defined()) parts.push_back(shard[k].to(torch::kFloat).contiguous());
      ++k;
      if (parts.empty()) continue;  // no gradient: AdamW leaves the parameter alone
      auto grad = parts.size() == 1 ? parts[0] : torch::empty_like(p);
      p.mutable_grad() = grad;
      auto key = state_key<Key>(p);
      auto found = states.find(key);
      if (found == states.end()) {
        auto st = std::make_unique<torch::optim::AdamWParamState>();
        st->step(0);
        st->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        st->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        found = states.emplace(key, std::move(st)).first;
      }
      auto* st = static_cast<torch::optim::AdamWParamState*>(found->second.get());
      TORCH_CHECK(st->exp_avg().is_contiguous() && st->exp_avg_sq().is_contiguous(), "fused AdamW: state not contiguous");
      st->step(st->step() + 1);
      if (parts.size() == 1) parts.clear();  // grad is that one gradient: nothing to sum
      sources.push_back(std::move(parts));
      // A new tensor, not the kept copy overwritten: a graph still holding the old one keeps its values.
      auto param_bf16 = has_bf16_weight(p) ? torch::empty(p.sizes(), p.options().dtype(torch::kBFloat16)) : torch::Tensor();
      slots.push_back({p, grad, param_bf16, st, options});
    }
  }

  std::vector<Chunk> chunks;
  for (size_t s = 0; s < slots.size(); ++s)
    for (int64_t b = 0, n = slots[s].param.numel(); b < n; b += kChunk) chunks.push_back({s, b, std::min(n, b + kChunk)});
  const auto n_chunks = static_cast<int64_t>(chunks.size());

  // Pass 1: sum the shards (in shard order) and square-sum per chunk.
  std::vector<double> sumsq(chunks.size(), 0.0);
  at::parallel_for(0, n_chunks, /*grain_size=*/1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      const auto& ch = chunks[c];
      float* g = slots[ch.param].grad.data_ptr<float>();
      const auto& src = sources[ch.param];
      std::vector<const float*> parts;
      for (const auto& part : src) parts.push_back(part.data_ptr<float>() + ch.begin);
      sumsq[c] = sum_parts_and_squares(parts.data(), static_cast<int>(parts.size()), g + ch.begin, ch.end - ch.begin);
    }
  });

  float clip = 1.0f;
  if (grad_clip > 0) {
    double total = 0;
    for (double s : sumsq) total += s;  // fixed order: the same norm for any thread count
    clip = static_cast<float>(std::min(1.0, grad_clip / (std::sqrt(total) + 1e-6)));
  }

  // Pass 2: clip, decoupled weight decay, moments, update.
  at::parallel_for(0, n_chunks, /*grain_size=*/1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      const auto& ch = chunks[c];
      const auto& slot = slots[ch.param];
      const auto& o = *slot.options;
      const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
      const auto step = static_cast<double>(slot.state->step());
      const float decay = static_cast<float>(1 - o.lr() * o.weight_decay());  // exactly 1 without decay
      const float b1 = static_cast<float>(beta1), one_minus_b1 = static_cast<float>(1 - beta1);
      const float b2 = static_cast<float>(beta2), one_minus_b2 = static_cast<float>(1 - beta2);
      const float bc2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(beta2, step)));
      const float neg_step_size = static_cast<float>(-o.lr() / (1 - std::pow(beta1, step)));
      const float eps = static_cast<float>(o.eps());
      adamw_update(slot.param.data_ptr<float>() + ch.begin, slot.grad.data_ptr<float>() + ch.begin,
                   slot.state->exp_avg().data_ptr<float>() + ch.begin,
                   slot.state->exp_avg_sq().data_ptr<float>() + ch.begin, ch.end - ch.begin,
                   AdamWScalars{clip, decay, b1, one_minus_b1, b2, one_minus_b2, bc2_sqrt, neg_step_size, eps},
                   slot.param_bf16.defined() ? reinterpret_cast<uint16_t*>(slot.param_bf16.data_ptr()) + ch.begin
                                             : nullptr);
    }
  });
  // Written in place through raw pointers: the version bump that LibTorch's in-place ops make, so that
  // whatever checks it (a kept copy, a graph that saved the parameter) sees the change.
  for (auto& slot : slots) {
    slot.param.unsafeGetTensorImpl()->bump_version();
    if (slot.param_bf16.defined()) set_bf16_weight(slot.param, slot.param_bf16);
  }
}

}  // namespace poslab
