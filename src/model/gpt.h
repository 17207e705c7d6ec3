// The GPT: pre-LayerNorm decoder-only transformer (nanoGPT's shape), with position entering
// only through the shared PositionalEncoding strategy. Parameter names (for model.pt):
//   wte.weight, pos.weight (learned only), h.{i}.ln_1.weight, h.{i}.attn.c_attn.weight,
//   h.{i}.attn.c_proj.weight, h.{i}.ln_2.weight, h.{i}.mlp.c_fc.weight, h.{i}.mlp.c_proj.weight,
//   ln_f.weight, and a matching .bias for each Linear and LayerNorm when model.bias is true.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <functional>
#include <mutex>

#include "config/config.h"
#include "model/kv_cache.h"
#include "model/positional/positional.h"

namespace poslab {

// LayerNorm with an optional bias (LibTorch 1.13's LayerNorm has no bias-free option).
struct LayerNormImpl : torch::nn::Module {
  LayerNormImpl(int64_t n_embd, bool bias);
  torch::Tensor forward(const torch::Tensor& x);
  // The residual stream's add before the norm: (h, norm(h)) with h = x + a, in one pass where the fused
  // ops apply; a undefined: (x, norm(x)).
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, const torch::Tensor& a);
  torch::Tensor weight, bias;
};
TORCH_MODULE(LayerNorm);

// What attention adds to its logits: the causal mask plus the encoding's bias, shared by every layer.
// Built whole, or (long sequences at evaluation) per block of queries, so that memory grows with T
// rather than with T^2: a block of queries q0..q1 needs only the keys 0..q1, the rest being masked.
struct AttentionBias {
  torch::Tensor whole;  // (T, T_k) or (H, T, T_k); undefined when built per block
  // Block mode: the encoding's bias alone for queries q0..q1 against keys 0..q1, (H, q1-q0, q1), or
  // undefined when it has none. The causal mask is applied by attention, to the last q1-q0 keys only:
  // every earlier key precedes every query of the block.
  std::function<torch::Tensor(int64_t q0, int64_t q1)> rows;
  int64_t query_block = 0;   // > 0: attention runs this many queries at a time, from rows()
  bool causal_only = false;  // whole is the plain causal mask aligned top-left (the fused kernels' is_causal)
};

struct CausalSelfAttentionImpl : torch::nn::Module {
  CausalSelfAttentionImpl(const ModelConfig& config, std::shared_ptr<PositionalEncodingImpl> pos);
  // x (B, T, C). kv: generating with a cache: this layer's keys and values so far, to which x's are
  // appended (T_k = cached + T); null: attention over x alone (T_k = T). last in 1..T-1: only the last
  // `last` queries attend (keys and values stay whole), and the output is (B, last, C).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& positions, const AttentionBias& bias,
                        LayerKV* kv = nullptr, int64_t last = 0);
  // softmax(scale q.k^T + mask) v for queries q (B, H, t_q, hs), the last t_q of keys k, v (B, H, t_k, hs):
  // a fused kernel where one applies, else explicit_attention.
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& mask,
                       bool is_causal, double p_drop);
  // Whether attend() runs LibTorch 2.x's fused scaled_dot_product_attention for queries q.
  bool takes_fused_kernel(const torch::Tensor& q) const;
  // softmax(scale q.k^T (+ the scores hook) + mask) v: every LibTorch 1.x run; on 2.x CoPE, recording, bf16 on the CPU.
  torch::Tensor explicit_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& mask, double p_drop);
  // A block of queries q (B, H, t_q, hs), the last t_q of keys k, v (B, H, t_k, hs), with the encoding's
  // bias rows (AttentionBias::rows; may be undefined) and the causal mask. Evaluation only (no autograd).
  torch::Tensor attend_block(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& bias_rows);
  torch::nn::Linear c_attn{nullptr}, c_proj{nullptr};
  torch::nn::Dropout resid_dropout{nullptr};
  int64_t n_head;
  double dropout;
  std::shared_ptr<PositionalEncodingImpl> pos;  // shared with the model, deliberately not registered here
  // Evaluation only (eval/attention_stats): when set, forward takes the explicit-scores path and stores
  // the softmax probabilities (B, H, T, T) here. Null in training, so the fused kernels are untouched.
  torch::Tensor* record_probs = nullptr;
};
TORCH_MODULE(CausalSelfAttention);

struct MLPImpl : torch::nn::Module {
  MLPImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(MLP);

struct BlockImpl : torch::nn::Module {
  BlockImpl(const ModelConfig& config, std::shared_ptr<PositionalEncodingImpl> pos);
  // The residual stream x plus pending (the previous block's MLP output, undefined for the first block)
  // -> (the stream after attention, this block's MLP output): each branch's output is added to the
  // stream by the norm that reads it next (ln_2, the next block's ln_1, ln_f), in the same pass.
  // last in 1..T-1: both come back for the last `last` tokens only (the final block, when only their
  // logits are wanted); the keys and values cached are still every token's.
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, const torch::Tensor& pending,
                                                  const torch::Tensor& positions, const AttentionBias& bias,
                                                  LayerKV* kv = nullptr, int64_t last = 0);
  LayerNorm ln_1{nullptr}, ln_2{nullptr};
  CausalSelfAttention attn{nullptr};
  MLP mlp{nullptr};
};
TORCH_MODULE(Block);

struct GPTImpl : torch::nn::Module {
  explicit GPTImpl(const ModelConfig& config);
  // idx (B, T) int64 -> logits (B, T, vocab). Throws PositionLimitError past the encoding's range.
  // positions (T,): as drawn by pos->positions() (batch shards draw once per step); undefined: drawn here
  // (at evaluation with randomize.eval, one draw per row, from its tokens: pos->eval_positions()).
  // last > 0: the logits of the last `last` tokens only, (B, last, vocab), the same values as the
  // whole forward's last rows: the final block then runs its queries, MLP and the head for those
  // rows alone (a probe or a sampler reads only them; at 2 layers the forward costs about half).
  torch::Tensor forward(const torch::Tensor& idx, torch::Tensor positions = {}, int64_t last = 0);
  // Generation with a KV cache: idx_new (B, T_new) continues the cache.length tokens held in `cache`,
  // at their true positions cache.length.., and their keys and values are appended. Returns the
  // logits (B, T_new, vocab) a forward over the whole sequence gives for those tokens; valid only
  // while pos->kv_cacheable(total length) (the caller checks and falls back to forward()). last > 0:
  // the logits of the last `last` new tokens only, as forward()'s; every new token is still cached.
  torch::Tensor forward_cached(const torch::Tensor& idx_new, KVCache& cache, int64_t last = 0);
  // Mean cross-entropy over targets != -1.
  static torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& targets);
  // Sum of the cross-entropy over targets != -1 (batch shards divide it by the whole batch's count).
  static torch::Tensor summed_loss(const torch::Tensor& logits, const torch::Tensor& targets);
  int64_t num_params() const;
  // Parameters that get weight decay: matrices of Linear layers, not biases, norms or embeddings.
  bool decays(const std::string& name, const torch::Tensor& p) const;

  // Without autograd (evaluation), attention whose scores would exceed attention_budget_bytes runs in
  // blocks of queries sized to fit it; query_block > 0 fixes the block instead (tests). Training, and
  // recording probabilities (eval/attention_stats), always attend whole.
  static constexpr int64_t kDefaultAttentionBudget = int64_t{64} << 20;
  int64_t attention_budget_bytes = kDefaultAttentionBudget;
  int64_t query_block = 0;
  // Queries per attention block for a forward over (B, T) tokens; T when attention runs whole.
  int64_t query_block_for(int64_t B, int64_t T) const;
  // The block the last forward_cached attended in (its new tokens' count when whole): what tests observe.
  // Not kept by forward(), which batch shards run on several threads at once.
  int64_t last_query_block = 0;

  ModelConfig config;
  torch::nn::Embedding wte{nullptr};
  torch::nn::Dropout drop{nullptr};
  torch::nn::ModuleList h{nullptr};
  LayerNorm ln_f{nullptr};
  std::shared_ptr<PositionalEncodingImpl> pos;  // registered once, here, as "pos"

 private:
  // Causal mask plus the encoding's bias for these positions (T,); cached per (T, device) only when
  // `cacheable` (a constant bias at positions 0..T-1).
  torch::Tensor attention_bias(const torch::Tensor& positions, bool cacheable);
  // (t_q, t_k) or (H, t_q, t_k): the encoding's bias plus the causal mask, queries being the last t_q keys.
  torch::Tensor masked_bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos);
  std::mutex bias_mutex_;  // batch shards run the forward pass on several threads at once
  torch::Tensor bias_cache_;
};
TORCH_MODULE(GPT);

}  // namespace poslab
