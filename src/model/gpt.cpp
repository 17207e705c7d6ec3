// GPT forward pass, top to bottom: embed, blocks (attention + MLP), final norm, tied head.
#include "model/gpt.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "model/fused_attention.h"
#include "model/fused_linear.h"
#include "model/fused_ops.h"

namespace poslab {
namespace F = torch::nn::functional;

// A Linear module's product through fused_linear: one autograd node under bf16 autocast on the CPU.
static torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return fused_linear(x, layer->weight, layer->bias);
}

LayerNormImpl::LayerNormImpl(int64_t n_embd, bool with_bias) {
  weight = register_parameter("weight", torch::ones({n_embd}));
  if (with_bias) bias = register_parameter("bias", torch::zeros({n_embd}));
}

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x) {
  return fused_layer_norm(x, weight, bias, /*eps=*/1e-5);
}

std::pair<torch::Tensor, torch::Tensor> LayerNormImpl::forward(const torch::Tensor& x, const torch::Tensor& a) {
  if (!a.defined()) return {x, forward(x)};
  return fused_add_layer_norm(x, a, weight, bias, /*eps=*/1e-5);
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig& c, std::shared_ptr<PositionalEncodingImpl> p)
    : n_head(c.n_head), dropout(c.dropout), pos(std::move(p)) {
  // One fused projection for q, k and v: one matmul instead of three.
  c_attn = register_module("c_attn", torch::nn::Linear(torch::nn::LinearOptions(c.n_embd, 3 * c.n_embd).bias(c.bias)));
  c_proj = register_module("c_proj", torch::nn::Linear(torch::nn::LinearOptions(c.n_embd, c.n_embd).bias(c.bias)));
  resid_dropout = register_module("resid_dropout", torch::nn::Dropout(c.dropout));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& positions,
                                               const AttentionBias& bias, LayerKV* kv, int64_t last) {
  const auto B = x.size(0), T = x.size(1), C = x.size(2);
  const int64_t first = last > 0 && last < T ? T - last : 0;  // the first query that attends
  const auto qkv_rows = linear(c_attn, x);  // (B, T, 3C)
  auto qkv = qkv_rows.split(C, /*dim=*/2);
  auto q = qkv[0].view({B, T, n_head, C / n_head}).transpose(1, 2);  // (B, H, T, hs)
  auto k = qkv[1].view({B, T, n_head, C / n_head}).transpose(1, 2);  // (B, H, T, hs)
  auto v = qkv[2].view({B, T, n_head, C / n_head}).transpose(1, 2);  // (B, H, T, hs)
  const auto q_in = q, k_in = k;
  std::tie(q, k) = kv ? pos->rotate_cached(q, k, positions) : pos->rotate(q, k, positions);
  if (kv) std::tie(k, v) = kv->append(k, v);  // (B, H, T_cached + T, hs): keys rotated once, when they arrived
  const double p_drop = is_training() ? dropout : 0.0;
  // Where the encoding left q and k as they were (no rotation) and nothing needs the probabilities or
  // the scores, attention reads the projection's rows and writes c_proj's, one node from one to the other.
  const bool unrotated = q.is_same(q_in) && k.is_same(k_in);
  if (unrotated && !kv && first == 0 && bias.query_block == 0 && !pos->needs_scores() && record_probs == nullptr &&
      p_drop == 0 && !takes_fused_kernel(q)) {
    const auto mask = bias.causal_only ? torch::Tensor() : bias.whole;
    if (fused_attention_qkv_applies(qkv_rows, n_head, mask))
      return resid_dropout(linear(c_proj, fused_attention_qkv(qkv_rows, n_head, mask,
                                                              1.0 / std::sqrt(static_cast<double>(C / n_head)))));
  }
  torch::Tensor y;  // (B, H, T - first, hs)
  if (bias.query_block > 0) {
    std::vector<torch::Tensor> blocks;
    for (int64_t q0 = first; q0 < T; q0 += bias.query_block) {
      const int64_t q1 = std::min(T, q0 + bias.query_block);
      // Every query of the block is the last of keys 0..q1 at most: later keys are masked anyway.
      blocks.push_back(attend_block(q.slice(2, q0, q1), k.slice(2, 0, q1), v.slice(2, 0, q1),
                                    bias.rows(q0, q1)));  // (B, H, q1 - q0, hs)
    }
    y = torch::cat(blocks, /*dim=*/2);
  } else if (first > 0) {
    // The last queries' rows of the mask: no longer aligned top-left, so never the kernels' is_causal.
    y = attend(q.slice(2, first), k, v, bias.whole.slice(-2, first), /*is_causal=*/false, p_drop);
  } else {
    y = attend(q, k, v, bias.whole, bias.causal_only, p_drop);
  }
  y = y.transpose(1, 2).contiguous().view({B, T - first, C});
  return resid_dropout(linear(c_proj, y));
}

bool CausalSelfAttentionImpl::takes_fused_kernel(const torch::Tensor& q) const {
#if TORCH_VERSION_MAJOR >= 2
  // CoPE reads q.k itself, which no fused kernel exposes, and recording needs the probabilities: both
  // take the explicit path. So does bf16 on the CPU: there LibTorch 2.6's kernels train 13-30x (causal)
  // and 2-4x (with a bias) slower than the explicit path at T 64-512, while in fp32 they are as fast or
  // faster (docs/libtorch2.md).
  return !pos->needs_scores() && record_probs == nullptr && (q.is_cuda() || q.scalar_type() == torch::kFloat);
#else
  return false;  // LibTorch 1.x has no scaled_dot_product_attention
#endif
}

torch::Tensor CausalSelfAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                              const torch::Tensor& mask, bool is_causal, double p_drop) {
#if TORCH_VERSION_MAJOR >= 2
  // Fused kernels: flash attention when only the causal mask applies, else the bias (ALiBi, T5,
  // KERPLE, Sandwich, FIRE) plus the causal mask as the additive attn_mask (a learned bias gets its
  // gradient through it).
  if (takes_fused_kernel(q)) {
    if (is_causal) return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, p_drop, /*is_causal=*/true);
    return at::scaled_dot_product_attention(q, k, v, mask.to(q.scalar_type()), p_drop, /*is_causal=*/false);
  }
#endif
  // poslab's fused softmax where nothing needs the probabilities themselves (CoPE reads the scores,
  // recording keeps the map, dropout draws on it). The causal limit is the kernel's own: a causal-only
  // mask is not read at all.
  if (!pos->needs_scores() && record_probs == nullptr && p_drop == 0 && fused_attention_applies(q, k, v, mask))
    return fused_attention(q, k, v, is_causal ? torch::Tensor() : mask, 1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  return explicit_attention(q, k, v, mask, p_drop);
}

// (t_q, t_k): 0 where key j is at or before query i, the queries being the last t_q of the keys; else -inf.
static torch::Tensor causal_mask(int64_t t_q, int64_t t_k, const torch::Device& device) {
  return torch::full({t_q, t_k}, -std::numeric_limits<float>::infinity(), torch::TensorOptions().device(device))
      .triu(/*diagonal=*/t_k - t_q + 1);
}

torch::Tensor CausalSelfAttentionImpl::attend_block(const torch::Tensor& q, const torch::Tensor& k,
                                                    const torch::Tensor& v, const torch::Tensor& bias_rows) {
  const auto t_q = q.size(2), t_k = k.size(2), hs = q.size(-1);
  // The fused kernel, CoPE and recording need the whole mask: attend() as for whole attention.
  if (takes_fused_kernel(q) || pos->needs_scores() || record_probs != nullptr || is_training()) {
    auto mask = causal_mask(t_q, t_k, q.device());
    return attend(q, k, v, bias_rows.defined() ? bias_rows + mask : mask, /*is_causal=*/false,
                  /*p_drop=*/is_training() ? dropout : 0.0);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  if (fused_attention_applies(q, k, v, bias_rows)) return fused_attention(q, k, v, bias_rows, scale);
  // The explicit path with fewer passes over the (H, t_q, t_k) scores, which dominate at long lengths:
  // the scale goes into q (t_q x hs values, not t_q x t_k), the bias is added once, and the causal mask
  // touches only the last t_q keys, in place, instead of a whole (t_q, t_k) mask built and added.
  auto att = torch::matmul(q * scale, k.transpose(-2, -1));  // (B, H, t_q, t_k)
  if (bias_rows.defined()) att = att + bias_rows;
  att.slice(/*dim=*/-1, t_k - t_q).masked_fill_(
      torch::ones({t_q, t_q}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(/*diagonal=*/1),
      -std::numeric_limits<float>::infinity());
  att = torch::softmax(att, /*dim=*/-1);
  return torch::matmul(att.to(v.scalar_type()), v);  // (B, H, t_q, hs)
}

torch::Tensor CausalSelfAttentionImpl::explicit_attention(const torch::Tensor& q, const torch::Tensor& k,
                                                          const torch::Tensor& v, const torch::Tensor& mask,
                                                          double p_drop) {
  const auto B = q.size(0), T = q.size(2), T_k = k.size(2), hs = q.size(-1);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  torch::Tensor att;  // (B, H, T, T_k)
  if (pos->needs_scores()) {
    // Context-dependent positions (CoPE) read the scaled q.k before the mask.
    att = pos->scores(torch::matmul(q, k.transpose(-2, -1)) * scale, q, scale) + mask;
  } else if (mask.dim() == 2) {
    // A mask shared by every head: one GEMM computes scale * q k^T + mask, no separate passes over the scores.
    // A 2-D mask is the causal mask alone (biases are per head), 0 and -inf: exact in bf16 under autocast.
    att = torch::baddbmm(mask.to(q.scalar_type()), q.reshape({B * n_head, T, hs}),
                         k.reshape({B * n_head, T_k, hs}).transpose(1, 2), /*beta=*/1.0, /*alpha=*/scale)
              .view({B, n_head, T, T_k});
  } else {
    att = torch::matmul(q, k.transpose(-2, -1)) * scale + mask;
  }
  att = torch::softmax(att, /*dim=*/-1);
  if (record_probs != nullptr) *record_probs = att.detach();
  if (p_drop > 0) att = F::dropout(att, F::DropoutFuncOptions().p(p_drop).training(true));
  return torch::matmul(att.to(v.scalar_type()), v);  // (B, H, T, hs)
}

MLPImpl::MLPImpl(const ModelConfig& c) {
  c_fc = register_module("c_fc", torch::nn::Linear(torch::nn::LinearOptions(c.n_embd, 4 * c.n_embd).bias(c.bias)));
  c_proj = register_module("c_proj", torch::nn::Linear(torch::nn::LinearOptions(4 * c.n_embd, c.n_embd).bias(c.bias)));
  dropout = register_module("dropout", torch::nn::Dropout(c.dropout));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) { return dropout(linear(c_proj, fused_gelu(linear(c_fc, x)))); }

BlockImpl::BlockImpl(const ModelConfig& c, std::shared_ptr<PositionalEncodingImpl> pos) {
  ln_1 = register_module("ln_1", LayerNorm(c.n_embd, c.bias));
  attn = register_module("attn", CausalSelfAttention(c, std::move(pos)));
  ln_2 = register_module("ln_2", LayerNorm(c.n_embd, c.bias));
  mlp = register_module("mlp", MLP(c));
}

std::pair<torch::Tensor, torch::Tensor> BlockImpl::forward(const torch::Tensor& x, const torch::Tensor& pending,
                                                          const torch::Tensor& positions, const AttentionBias& bias,
                                                          LayerKV* kv, int64_t last) {
  auto [h, a_in] = ln_1->forward(x, pending);  // h = x + pending
  auto a = attn->forward(a_in, positions, bias, kv, last);  // (B, T or last, C)
  if (a.size(1) < h.size(1)) h = h.slice(1, h.size(1) - a.size(1));
  auto [h2, m_in] = ln_2->forward(h, a);
  return {h2, mlp(m_in)};  // the stream and the MLP's output, which the next norm adds to it
}

GPTImpl::GPTImpl(const ModelConfig& c) : config(c) {
  wte = register_module("wte", torch::nn::Embedding(c.vocab_size, c.n_embd));
  pos = register_module("pos", make_positional({c.pos_encoding, c.n_embd, c.n_head, c.block_size}));
  drop = register_module("drop", torch::nn::Dropout(c.dropout));
  h = register_module("h", torch::nn::ModuleList());
  for (int i = 0; i < c.n_layer; ++i) h->push_back(Block(c, pos));
  ln_f = register_module("ln_f", LayerNorm(c.n_embd, c.bias));
  // A run trained with a rope scaling (fine-tuned to a longer context) keeps it for its whole life.
  pos->set_rope_scaling(to_rope_scaling(c.pos_encoding.rope_scaling, c.block_size));

  // nanoGPT's init: N(0, 0.02), residual projections scaled by 1/sqrt(2 * n_layer).
  torch::NoGradGuard no_grad;
  for (auto& item : named_parameters()) {
    const auto& name = item.key();
    auto& p = item.value();
    if (name.rfind("pos.", 0) == 0) continue;  // the encoding initialises its own parameters
    if (p.dim() == 2) {
      const bool residual = name.size() >= 13 && name.compare(name.size() - 13, 13, "c_proj.weight") == 0;
      p.normal_(0.0, residual ? 0.02 / std::sqrt(2.0 * c.n_layer) : 0.02);
    } else if (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0) {
      p.zero_();
    }
  }
}

torch::Tensor GPTImpl::masked_bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) {
  auto mask = causal_mask(q_pos.size(0), k_pos.size(0), q_pos.device());  // (t_q, t_k)
  auto b = pos->bias(q_pos, k_pos);                                       // (H, t_q, t_k) or undefined
  return b.defined() ? b + mask : mask;
}

torch::Tensor GPTImpl::attention_bias(const torch::Tensor& positions, bool cacheable) {
  const auto T = positions.size(0);
  // A learned bias (t5, kerple, fire) changes every step and carries the graph: built per forward.
  if (!cacheable) return masked_bias(positions, positions);
  std::lock_guard<std::mutex> lock(bias_mutex_);
  if (!bias_cache_.defined() || bias_cache_.size(-1) != T || bias_cache_.device() != positions.device())
    bias_cache_ = masked_bias(positions, positions);
  return bias_cache_;
}

// Block mode: attention runs `block` queries at a time, the encoding's bias rows built for each block alone.
static AttentionBias bias_in_blocks(const std::shared_ptr<PositionalEncodingImpl>& pos, const torch::Tensor& positions,
                                    int64_t block) {
  AttentionBias bias;
  bias.query_block = block;
  bias.rows = [pos, positions](int64_t q0, int64_t q1) {
    return pos->bias(positions.slice(0, q0, q1), positions.slice(0, 0, q1));  // (H, q1 - q0, q1) or undefined
  };
  return bias;
}

int64_t GPTImpl::query_block_for(int64_t B, int64_t T) const {
  if (torch::GradMode::is_enabled()) return T;  // backward keeps every block's scores: nothing to save
  for (const auto& block : *h)
    if (block->as<Block>()->attn->record_probs != nullptr) return T;  // the whole (T, T) is the point
  if (query_block > 0) return std::min(query_block, T);
  // Scores, softmax and a copy per query row; CoPE holds several more (gates, positions, gathered logits).
  const int64_t copies = pos->needs_scores() ? 8 : 3;
  const int64_t row_bytes = B * config.n_head * T * 4 * copies + T * pos->bias_scratch_bytes_per_pair();
  return std::clamp<int64_t>(attention_budget_bytes / std::max<int64_t>(1, row_bytes), 1, T);
}

torch::Tensor GPTImpl::forward(const torch::Tensor& idx, torch::Tensor positions, int64_t last) {
  const auto B = idx.size(0), T = idx.size(1);
  pos->check_length(T);
  // Only a constant bias at positions 0..T-1 may be cached: randomized positions change every step.
  const bool cacheable = !pos->randomizes(is_training()) && pos->constant_bias();
  if (!positions.defined() && !is_training() && pos->randomizes(/*training=*/false)) {
    // A draw per sequence, from its own tokens: a row's logits are the same in any batch, at any time.
    if (B > 1) {
      std::vector<torch::Tensor> rows;
      for (int64_t b = 0; b < B; ++b) rows.push_back(forward(idx.slice(0, b, b + 1), {}, last));  // (1, T or last, vocab)
      return torch::cat(rows, 0);
    }
    positions = pos->eval_positions(idx[0]);  // (T,)
  }
  if (!positions.defined()) positions = pos->positions(T, is_training(), idx.device());  // (T,)
  auto x = drop(pos->embed(wte(idx), positions));  // (B, T, C)
  // Built once per forward and shared by every layer, as the strategy module itself is.
  AttentionBias bias;
  const int64_t block = query_block_for(B, T);
  if (block < T) {
    bias = bias_in_blocks(pos, positions, block);
  } else {
    bias.whole = attention_bias(positions, cacheable);  // (T, T) or (H, T, T)
    bias.causal_only = bias.whole.dim() == 2;
  }
  torch::Tensor pending;  // the last branch's output, added to the stream by the norm after it
  // The final block runs only the last rows' queries, unless the encoding reads the scores and has not
  // said it takes queries that are the last of the keys (kv_cacheable; CoPE does): then every row runs.
  const int64_t rows = last > 0 && last < T ? last : 0;
  const bool last_rows_only = !pos->needs_scores() || pos->kv_cacheable(T);
  const auto n = h->size();
  for (size_t i = 0; i < n; ++i)
    std::tie(x, pending) = (*h)[i]->as<Block>()->forward(x, pending, positions, bias, nullptr,
                                                         i + 1 == n && last_rows_only ? rows : 0);
  if (x.size(1) > rows && rows > 0) x = x.slice(1, T - rows), pending = pending.slice(1, T - rows);
  x = ln_f->forward(x, pending).second;
  return fused_linear(x, wte->weight);  // (B, T or last, vocab), head tied to the token embedding
}

torch::Tensor GPTImpl::forward_cached(const torch::Tensor& idx_new, KVCache& cache, int64_t last) {
  const auto past = cache.length, T = idx_new.size(1);
  pos->check_length(past + T);  // a learned table's end: PositionLimitError, as forward() raises
  if (cache.layers.size() != h->size()) cache.layers.assign(h->size(), LayerKV{});
  const auto opts = torch::TensorOptions().dtype(torch::kLong).device(idx_new.device());
  const auto positions = torch::arange(past, past + T, opts);  // (T_new,): the new tokens' true positions
  auto x = drop(pos->embed(wte(idx_new), positions));          // (B, T_new, C)
  AttentionBias bias;
  // A prefill whose scores would pass the attention budget runs in query blocks, as forward() does: a
  // 100,000-token prompt then fills the cache in linear memory. Its keys are its own queries' (past 0),
  // which is what the blocks assume.
  const int64_t block = past == 0 ? query_block_for(idx_new.size(0), T) : T;
  last_query_block = block;
  if (block < T) {
    bias = bias_in_blocks(pos, positions, block);
  } else {
    // The new queries' rows of the bias against every key, cached or new: built per call, since a
    // bias row depends on the query's position (ALiBi's -m (i - j) is not a function of T alone).
    bias.whole = masked_bias(positions, torch::arange(past + T, opts));  // (T_new, T_all) or (H, T_new, T_all)
    // The fused kernels' is_causal aligns the mask top-left, wrong once the queries start past 0.
    bias.causal_only = bias.whole.dim() == 2 && past == 0;
  }
  torch::Tensor pending;
  const auto n = h->size();
  for (size_t i = 0; i < n; ++i)
    std::tie(x, pending) =
        (*h)[i]->as<Block>()->forward(x, pending, positions, bias, &cache.layers[i], i + 1 == n ? last : 0);
  cache.length += T;
  x = ln_f->forward(x, pending).second;
  return fused_linear(x, wte->weight);  // (B, T_new or last, vocab)
}

static torch::Tensor cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                   F::CrossEntropyFuncOptions::reduction_t reduction) {
  return F::cross_entropy(logits.reshape({-1, logits.size(-1)}).to(torch::kFloat), targets.reshape({-1}),
                          F::CrossEntropyFuncOptions().ignore_index(-1).reduction(reduction));
}

torch::Tensor GPTImpl::loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return cross_entropy(logits, targets, torch::kMean);
}

// The training loss: fused on the CPU (one pass each way over the logits in their own type).
torch::Tensor GPTImpl::summed_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return fused_cross_entropy_sum(logits, targets);
}

int64_t GPTImpl::num_params() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

bool GPTImpl::decays(const std::string& name, const torch::Tensor& p) const {
  return p.dim() >= 2 && name.rfind("wte.", 0) != 0 && name.rfind("pos.", 0) != 0;
}

}  // namespace poslab
