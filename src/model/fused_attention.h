// Attention's softmax on the CPU as one autograd function over poslab's own loops
// (model/attention_kernels.h): the scale, the mask or bias, the causal limit, the softmax and the cast to
// the matmul's type in one pass each way, where LibTorch takes a mul, an add, a softmax and a cast (and
// their backwards). In bfloat16 where oneDNN is called directly (model/dnnl_matmul.h) the two products
// around it join it in one autograd node; elsewhere they stay LibTorch's. On with the other fused ops
// (train.fused_ops).
#pragma once
#include "util/torch_api.h"

namespace poslab {

// Without autograd (evaluation, a probe's prefill), fused attention over more than this many queries runs
// them in blocks of it, each block against the keys its queries see: the scores' upper triangle is never
// computed, and a block's scores, (B, H, 128, keys), stay near the cache. Callers sizing a batch by its
// scores count this many rows. Blocks of 64 and 128 measured close on the main job's passkey probe, 128
// a little faster (docs/benchmarks.md).
constexpr int64_t kInferenceQueryBlock = 128;

// Whether fused_attention takes these tensors: the fused ops on, CPU tensors of float or bfloat16, and a
// float mask (or none).
bool fused_attention_applies(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& mask);

// softmax(scale q k^T + mask) v, causal: query i of t_q sees keys j <= t_k - t_q + i (the queries are the
// last t_q of the keys). q (B, H, t_q, hs), k and v (B, H, t_k, hs); mask broadcastable to (B, H, t_q, t_k)
// or undefined, and it takes its gradient (a learned bias). The probabilities are float, or bfloat16 where
// the scores are (under bf16 autocast): the type the second matmul reads.
torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& mask, double scale);

// The same attention from the fused projection's output: qkv (B, T, 3C), q, k and v side by side in each
// row and each split into n_head heads, to y in rows (B, T, C), the heads side by side. One autograd node,
// whose backward writes qkv's gradient whole. Applies where fused_attention takes the bfloat16 path on
// oneDNN: the fused ops on, oneDNN called directly, qkv bfloat16 on the CPU, the mask float or undefined.
bool fused_attention_qkv_applies(const torch::Tensor& qkv, int64_t n_head, const torch::Tensor& mask);
torch::Tensor fused_attention_qkv(const torch::Tensor& qkv, int64_t n_head, const torch::Tensor& mask, double scale);

}  // namespace poslab
