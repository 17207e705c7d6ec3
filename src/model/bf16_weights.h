// bfloat16 copies of float weights, shared by the batch shards and kept from step to step: the fused
// Linear reads a weight's copy instead of casting the weight at every call on every shard, and the fused
// AdamW writes the next copy in the pass that updates the weight. A copy serves while its weight is the
// same tensor, on the same storage, at the same version (every in-place change bumps the version).
#pragma once
#include "util/torch_api.h"

namespace poslab {

// w in bfloat16, equal to w.to(torch::kBFloat16): the kept copy while it is valid, else a new cast, kept
// (w: a float CPU tensor). Thread-safe. Only parameters (leaves that require a gradient) are kept; any
// other tensor, an inference tensor among them (it has no version), is cast every time.
torch::Tensor bf16_weight(const torch::Tensor& w);

// Whether w has a kept copy (the fused AdamW writes the next one only for those).
bool has_bf16_weight(const torch::Tensor& w);

// Keeps `copy`, w's values in bfloat16 at w's current version, as w's copy.
void set_bf16_weight(const torch::Tensor& w, torch::Tensor copy);

// Drops every kept copy.
void clear_bf16_weights();

}  // namespace poslab
