// Gradient clipping and the AdamW update in two passes over raw float arrays, split over the cores.
// The CPU alternative to clip_grad_norm_ + torch::optim::AdamW::step, which launch ~10 small ops
// per parameter on one thread. Moments live in the AdamW object's own state, so checkpoints and
// the fallback path see the same optimizer.
#pragma once

#include "util/torch_api.h"

#include <vector>

namespace poslab {

// Whether the fused step can run: CPU, fp32 contiguous parameters, no amsgrad.
bool fused_adamw_applies(const torch::optim::AdamW& optimizer);

// One update. shard_grads[s][k] is shard s's gradient for parameter k of the optimizer's groups in
// order (undefined = no gradient); shards are summed in order into each parameter's .grad(). With
// grad_clip > 0 the summed gradients are scaled as clip_grad_norm_ does (max_norm / (norm + 1e-6),
// at most 1; .grad() keeps the unclipped sum). Deterministic for any thread count: partial sums are
// combined in a fixed order. Runs on LibTorch's intra-op threads (at::parallel_for). Bumps each
// updated parameter's version, as an in-place op would, and writes the next bfloat16 copy of those
// that have one kept (model/bf16_weights.h).
void fused_adamw_step(torch::optim::AdamW& optimizer, const std::vector<std::vector<torch::Tensor>>& shard_grads,
                      double grad_clip);

// The parameters of the optimizer's groups in the order fused_adamw_step indexes them.
std::vector<torch::Tensor> optimizer_params(const torch::optim::AdamW& optimizer);

}  // namespace poslab
