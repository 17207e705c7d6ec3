// The positional-encoding strategy: one interface, a hook per place where position enters a
// transformer (x-transformers' taxonomy, plus CoPE's scores). The model calls every hook each
// forward; each is a no-op unless the family overrides it, so nothing outside the factory switches on kind.
#pragma once
// The headers a plug-in or a program linking poslab includes take only the LibTorch they use: torch/torch.h
// doubles a plug-in's compile (~14 s against ~7 s a unit); poslab's own units have it precompiled.
#include <torch/nn/module.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.h"
#include "model/positional/registry.h"
#include "model/positional/rope_scaling.h"

namespace poslab {

// Up to this randomize.max_position training draws its positions as torch::randperm's first T (the draw of
// every run so far); past it, by Floyd's algorithm, whose cost does not grow with max_position.
constexpr int64_t kRandpermMaxPosition = 1 << 16;
// Few positions spread far (randomized up to a large max_position): tables and caches up to the largest
// position would hold billions of rows, so the encodings compute the rows of these positions alone.
inline bool sparse_positions(int64_t largest_plus_one, int64_t count) {
  return largest_plus_one > kRandpermMaxPosition && largest_plus_one > 4 * count;
}

// A sequence longer than an encoding can represent (the learned table): reported as n/a.
struct PositionLimitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// `poslab pe --param name=value,...`: values an inspection uses instead of the encoding's own.
using InspectParams = std::map<std::string, double>;

class PositionalEncodingImpl : public torch::nn::Module {
 public:
  explicit PositionalEncodingImpl(std::string kind) : kind_(std::move(kind)) {}
  const std::string& kind() const { return kind_; }
  virtual std::string family() const = 0;  // additive | rotary | bias | context | none

  // Additive family: x (B, T, C) -> x + PE[positions]. positions: (T,) int64.
  virtual torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& positions) { return x; }
  // Rotary family: q, k (B, H, T, hs) -> rotated by their positions.
  virtual std::pair<torch::Tensor, torch::Tensor> rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                         const torch::Tensor& positions) {
    return {q, k};
  }
  // Bias family: (H, t_q, t_k) added to the scaled attention logits, or an undefined tensor.
  // Positions, not lengths, so randomized positions reach bias kinds. q_pos (t_q,), k_pos (t_k,) int64.
  virtual torch::Tensor bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) { return {}; }
  // True when bias() depends on the positions alone (no parameters): the model may cache it across steps.
  virtual bool constant_bias() const { return true; }
  // Context-dependent family (CoPE): att (B, H, t_q, t_k) = scale * q.k before the mask, queries being
  // the last t_q of t_k positions; returns the logits with the encoding's term added. Kinds that
  // override it need explicit scores.
  virtual bool needs_scores() const { return false; }
  virtual torch::Tensor scores(const torch::Tensor& att, const torch::Tensor& q, double scale) { return att; }

  // Evaluation-time RoPE scaling (PI, NTK, YaRN): rotary kinds change their frequencies; every
  // other kind refuses an active scaling with ConfigError, since it has no frequencies to stretch.
  virtual void set_rope_scaling(const RopeScaling& scaling);
  // The scaling in force (kind "none" unless set): a run trained with one keeps it at evaluation.
  virtual RopeScaling rope_scaling() const { return {}; }

  // KV-cache decoding (model/kv_cache.h): true when the keys and values of `length` tokens, each
  // computed once when its token arrived, equal what a forward over all `length` tokens computes.
  // Default rule: fixed positions 0..T-1 (no randomized draw at evaluation) within max_positions().
  virtual bool kv_cacheable(int64_t length) const;
  // rotate() for KV-cache decoding: a cached key keeps the transform it got, so it must not depend on
  // the sequence's current length (xPos overrides it: its full-sequence scale is centred on the length).
  virtual std::pair<torch::Tensor, torch::Tensor> rotate_cached(const torch::Tensor& q, const torch::Tensor& k,
                                                                const torch::Tensor& positions) {
    return rotate(q, k, positions);
  }

  // Scratch bytes bias() holds per (query, key) pair beyond its (H, t_q, t_k) result (FIRE's MLP hidden
  // layer): the attention's query blocks and the memory checks count it.
  virtual int64_t bias_scratch_bytes_per_pair() const { return 0; }

  // Longest sequence the encoding represents; -1 when unbounded.
  virtual int64_t max_positions() const { return -1; }
  // Throws PositionLimitError when `length` tokens cannot be represented (xPos adds where its scales overflow).
  virtual void check_length(int64_t length) const;
  // The longest sequence an evaluation forward takes (check_length's bound): max_positions(), or fewer
  // under a randomized draw at evaluation (randomize.max_position distinct positions); -1 when unbounded.
  virtual int64_t eval_length_limit() const;

  // Randomized positions (Ruoss et al. 2023), for any kind: while training (and at evaluation when
  // `eval`), a sequence of T tokens gets T sorted distinct positions drawn from [0, max_position).
  void set_randomize(int64_t max_position, bool eval) { randomize_max_ = max_position, randomize_eval_ = eval; }
  bool randomizes(bool training) const { return randomize_max_ > 0 && (training || randomize_eval_); }
  // (T,) int64 on `device`: 0..T-1, or the random draw (from torch's CPU generator, so a checkpoint's
  // RNG state makes it resumable): a permutation's first T up to kRandpermMaxPosition, Floyd's algorithm past it.
  torch::Tensor positions(int64_t T, bool training, const torch::Device& device) const;
  // The draw at evaluation (randomize.eval) for one sequence, tokens (T,) -> (T,) on their device: seeded by
  // the tokens themselves, so a window's positions, and its loss, do not depend on what else was evaluated,
  // in which batch or in which order. GPTImpl::forward draws one per row at evaluation.
  torch::Tensor eval_positions(const torch::Tensor& tokens) const;

  // What `poslab pe` prints: named tensors describing the encoding over n positions.
  virtual std::map<std::string, torch::Tensor> inspect(int64_t n, int64_t dim, const InspectParams& params);

 protected:
  // Throws ConfigError naming the first --param this kind does not know.
  void reject_params(const InspectParams& params, const std::vector<std::string>& known) const;

 private:
  std::string kind_;
  int64_t randomize_max_ = 0;
  bool randomize_eval_ = false;
};

// The multiplier on an additive encoding when pos_encoding.scale is 0, from the kind's spec
// (EncodingSpec::default_scale; 1 for a kind without one): 1 for index (the naive scheme, on purpose);
// 1/sqrt(n_embd) for the fixed sinusoidal and binary tables, whose unit-size components would otherwise
// drown nanoGPT's N(0, 0.02) token embeddings (x-transformers' choice).
double default_additive_scale(const std::string& kind, int64_t n_embd);
// pos_encoding.scale, or the kind's default when it is 0.
double additive_scale(const PositionalOptions& options);

// A strategy for options.encoding.kind, built by the registered spec (model/positional/registry.h).
// ConfigError for an unknown kind, or when a plug-in's constructor throws.
std::shared_ptr<PositionalEncodingImpl> make_positional(const PositionalOptions& options);
// The family of a kind (additive, rotary, bias, context, none); ConfigError for an unknown kind.
std::string encoding_family(const std::string& kind);

// ---- the encodings' formulas, exposed for tests and for `poslab pe` ----

// (n, d): PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(p / base^(2i/d)).
torch::Tensor sinusoidal_table(int64_t n, int64_t d, double base);
// (n, d): the same at the positions (n,) given (the table's rows p, computed alone).
torch::Tensor sinusoidal_rows(const torch::Tensor& positions, int64_t d, double base);
// (n, d): low `bits` components hold the bits of p (LSB first), as +-1 or 0/1; the rest zero.
torch::Tensor binary_table(int64_t n, int64_t d, int bits, bool signed_bits);
torch::Tensor binary_rows(const torch::Tensor& positions, int64_t d, int bits, bool signed_bits);
// (n, head_dim/2): angle p * theta_i, theta_i = base^(-2i/head_dim).
torch::Tensor rope_angles(int64_t n, int64_t head_dim, double base);
// (T, hs/2): the same at arbitrary positions (T,).
torch::Tensor rope_angles_at(const torch::Tensor& positions, int64_t head_dim, double base);
// (hs/2,) double: xPos's zeta_k = (2k + 0.4 hs) / (1.4 hs).
torch::Tensor xpos_zeta(int64_t head_dim);
// positions - ceil(len/2), len = max position + 1 (torchscale's centring).
torch::Tensor xpos_centred(const torch::Tensor& positions);
// The longest sequence whose centred xPos scales zeta^(+-p/scale_base) stay well inside float's range (e^80 at
// most, whatever the head size: the smallest zeta is 2/7): 2 floor(80 scale_base / ln 3.5), about 128 scale_base.
int64_t xpos_max_length(double scale_base);
// (T, hs/2) double: zeta^(p/scale_base) at centred positions p.
torch::Tensor xpos_scale(const torch::Tensor& centred, int64_t head_dim, double scale_base);
// Rotates interleaved pairs (x[2i], x[2i+1]) of x (..., T, hs) by angles (T, hs/2).
torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);
// Press et al. 2022 head slopes.
std::vector<double> alibi_slopes(int64_t n_head);
// (H, t_q, t_k): -m_h * (i - j); queries are the last t_q of t_k positions.
torch::Tensor alibi_bias(const std::vector<double>& slopes, int64_t t_q, int64_t t_k);
// (H, t_q, t_k): -m_h * (q_pos[i] - k_pos[j]).
torch::Tensor alibi_bias(const std::vector<double>& slopes, const torch::Tensor& q_pos, const torch::Tensor& k_pos);
// (t_q, t_k) float32: q_pos[i] - k_pos[j], the signed distance every relative kind starts from.
torch::Tensor relative_distance(const torch::Tensor& q_pos, const torch::Tensor& k_pos);

}  // namespace poslab
