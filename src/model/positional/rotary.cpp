// RoPE: rotate each interleaved pair (2i, 2i+1) of q and k by p * theta_i; xPos scales the rotated
// pairs by zeta_i^(+-p/gamma) so that each pair's share of q.k decays as zeta_i^((n-m)/gamma).
#include "model/positional/rotary.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "model/fused_ops.h"

namespace poslab {

torch::Tensor rope_angles(int64_t n, int64_t head_dim, double base) {
  return rope_angles_at(torch::arange(n, torch::kLong), head_dim, base);
}

torch::Tensor rope_angles_at(const torch::Tensor& positions, int64_t head_dim, double base) {
  auto theta = torch::pow(torch::tensor(base, torch::kDouble),
                          -torch::arange(0, head_dim, 2, torch::kDouble) / static_cast<double>(head_dim));  // (hs/2,)
  return torch::outer(positions.to(torch::kDouble).cpu(), theta);  // (n, hs/2), double: exact angles at long p
}

torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  if (fused_rotary_applies(x, cos, sin)) return fused_rotary(x, cos, sin);  // the same, bit for bit, in one pass
  auto pairs = x.unflatten(-1, {-1, 2});      // (..., T, hs/2, 2)
  auto x0 = pairs.select(-1, 0), x1 = pairs.select(-1, 1);
  auto r0 = x0 * cos - x1 * sin;
  auto r1 = x0 * sin + x1 * cos;
  return torch::stack({r0, r1}, -1).flatten(-2).to(x.scalar_type());  // (..., T, hs)
}

torch::Tensor xpos_zeta(int64_t head_dim) {
  const double d = static_cast<double>(head_dim);
  return (torch::arange(0, head_dim / 2, torch::kDouble) * 2 + 0.4 * d) / (1.4 * d);  // (hs/2,) in (0, 1)
}

torch::Tensor xpos_centred(const torch::Tensor& positions) {
  // torchscale's centring: 0..len-1 becomes -ceil(len/2)..; it cancels in q.k but keeps zeta^(p/gamma) finite.
  const int64_t len = positions.numel() ? positions.max().item<int64_t>() + 1 : 0;
  return positions - (len + 1) / 2;
}

// A number as a person writes it (512, 0.001): for messages.
static std::string fmt_number(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

int64_t xpos_max_length(double scale_base) {
  const double half = std::floor(80.0 * scale_base / std::log(3.5));
  return half >= 4e18 ? std::numeric_limits<int64_t>::max() : 2 * static_cast<int64_t>(half);
}

// The smallest scale_base, in hundredths, whose xpos_max_length reaches `reach` positions: what an error
// suggests must itself pass (ceil(reach ln 3.5 / 160) ignored the floor: 1 for 127 positions, which fails).
static double xpos_min_scale_base(int64_t reach) {
  double s = std::ceil((reach + 1) / 2 * std::log(3.5) / 80.0 * 100.0) / 100.0;
  while (xpos_max_length(s) < reach) s += 0.01;
  return s;
}

torch::Tensor xpos_scale(const torch::Tensor& centred, int64_t head_dim, double scale_base) {
  auto power = centred.to(torch::kDouble).cpu().view({-1, 1}) / scale_base;  // (T, 1)
  return torch::pow(xpos_zeta(head_dim).view({1, -1}), power);               // (T, hs/2), double
}

std::pair<torch::Tensor, torch::Tensor> RotaryEncodingImpl::cos_sin(const torch::Tensor& positions,
                                                                    const torch::Device& device) {
  const int64_t needed = positions.numel() ? positions.max().item<int64_t>() + 1 : 0;
  if (sparse_positions(needed, positions.numel())) {
    // A table up to the largest would hold billions of rows (58 GiB at 2e9): the angles of these positions
    // alone, the same numbers a table holds.
    const auto f = rope_frequencies(rot_dims_, base_, scaling_, needed);
    auto angles = torch::outer(positions.to(torch::kCPU, torch::kDouble), f.inv_freq);  // (T, rot_dims/2)
    return {(angles.cos() * f.attention_factor).to(torch::kFloat).to(device),
            (angles.sin() * f.attention_factor).to(torch::kFloat).to(device)};
  }
  torch::Tensor cos_table, sin_table;
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    // Dynamic NTK's frequencies depend on the sequence length, so its table is exact-size.
    const bool per_length = scaling_.kind == "dynamic_ntk";
    if (!cos_.defined() || cos_.size(0) < needed || cos_.device() != device || (per_length && cos_.size(0) != needed)) {
      int64_t rows = per_length ? needed : std::max<int64_t>(needed, cos_.defined() ? 2 * cos_.size(0) : needed);
      const auto f = rope_frequencies(rot_dims_, base_, scaling_, needed);
      auto angles = torch::outer(torch::arange(rows, torch::kDouble), f.inv_freq);  // (rows, rot_dims/2)
      // YaRN's attention factor multiplies cos and sin (as HF does), so q.k grows by its square.
      cos_ = (angles.cos() * f.attention_factor).to(torch::kFloat).to(device);
      sin_ = (angles.sin() * f.attention_factor).to(torch::kFloat).to(device);
    }
    cos_table = cos_, sin_table = sin_;
  }
  return {cos_table.index_select(0, positions), sin_table.index_select(0, positions)};  // (T, rot_dims/2)
}

torch::Tensor RotaryEncodingImpl::rotate_part(const torch::Tensor& x, const torch::Tensor& cos,
                                              const torch::Tensor& sin) const {
  if (rot_dims_ == head_dim_) return apply_rotary(x, cos, sin);
  return torch::cat({apply_rotary(x.narrow(-1, 0, rot_dims_), cos, sin), x.narrow(-1, rot_dims_, head_dim_ - rot_dims_)},
                    -1);  // (..., T, hs)
}

std::pair<torch::Tensor, torch::Tensor> RotaryEncodingImpl::rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                                   const torch::Tensor& positions) {
  auto [cos, sin] = cos_sin(positions, q.device());
  return {rotate_part(q, cos, sin), rotate_part(k, cos, sin)};
}

void RotaryEncodingImpl::set_rope_scaling(const RopeScaling& scaling) {
  try {
    validate_rope_scaling(scaling, "rope scaling");
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
  // NTK-aware scaling keeps the highest frequency, the first pair's, and spreads the others: with one rotated
  // pair there are no others (the base's exponent d / (d - 2) divides by zero and the table comes out as it was).
  if ((scaling.kind == "ntk" || scaling.kind == "dynamic_ntk") && rot_dims_ == 2)
    throw ConfigError("rope scaling '" + scaling.kind + "': the encoding rotates one pair of dimensions, whose frequency " +
                      scaling.kind + " keeps, so it would change nothing; use linear or yarn, or rotate more dimensions " +
                      "(a larger model.pos_encoding.rotary_fraction or head)");
  std::lock_guard<std::mutex> lock(cache_mutex_);
  scaling_ = scaling;
  cos_ = sin_ = torch::Tensor();  // rebuilt with the new frequencies
}

RopeScaling RotaryEncodingImpl::rope_scaling() const { return scaling_; }

std::map<std::string, torch::Tensor> RotaryEncodingImpl::inspect(int64_t n, int64_t dim, const InspectParams& params) {
  reject_params(params, {});
  const int64_t rot = rot_dims_ == head_dim_ ? dim : rot_dims_;  // `pe --dim` sizes the head
  if (!scaling_.active()) return {{"angles", rope_angles(n, rot, base_).to(torch::kFloat)}};  // (n, rot/2)
  const auto f = rope_frequencies(rot, base_, scaling_, n);
  return {{"angles", torch::outer(torch::arange(n, torch::kDouble), f.inv_freq).to(torch::kFloat)},  // (n, rot/2)
          {"inv_freq", f.inv_freq},                                                                // (rot/2,)
          {"attention_factor", torch::tensor(f.attention_factor, torch::kDouble)}};
}

bool RotaryEncodingImpl::kv_cacheable(int64_t length) const {
  return PositionalEncodingImpl::kv_cacheable(length) && scaling_.kind != "dynamic_ntk";
}

std::pair<torch::Tensor, torch::Tensor> XposEncodingImpl::rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                                 const torch::Tensor& positions) {
  return rotate_scaled(q, k, positions, xpos_centred(positions));
}

std::pair<torch::Tensor, torch::Tensor> XposEncodingImpl::rotate_cached(const torch::Tensor& q, const torch::Tensor& k,
                                                                        const torch::Tensor& positions) {
  return rotate_scaled(q, k, positions, positions);
}

bool XposEncodingImpl::kv_cacheable(int64_t length) const {
  return RotaryEncodingImpl::kv_cacheable(length) && length <= static_cast<int64_t>(16 * scale_base_);
}

void XposEncodingImpl::check_length(int64_t length) const {
  RotaryEncodingImpl::check_length(length);
  const int64_t limit = xpos_max_length(scale_base_);
  if (length > limit)
    throw PositionLimitError("xpos scales overflow float past " + std::to_string(limit) + " tokens (about 128 x scale_base " +
                             fmt_number(scale_base_) + ")");
}

int64_t XposEncodingImpl::eval_length_limit() const {
  const int64_t base = RotaryEncodingImpl::eval_length_limit(), limit = xpos_max_length(scale_base_);
  return base < 0 ? limit : std::min(base, limit);
}

std::pair<torch::Tensor, torch::Tensor> XposEncodingImpl::rotate_scaled(const torch::Tensor& q, const torch::Tensor& k,
                                                                        const torch::Tensor& positions,
                                                                        const torch::Tensor& centred) {
  auto [cos, sin] = cos_sin(positions, q.device());  // rotation angles use the un-centred positions
  auto up = xpos_scale(centred, head_dim_, scale_base_);  // (T, hs/2) zeta^(n/gamma)
  auto s_q = up.to(torch::kFloat).to(q.device()), s_k = up.reciprocal().to(torch::kFloat).to(q.device());
  return {apply_rotary(q, cos * s_q, sin * s_q), apply_rotary(k, cos * s_k, sin * s_k)};
}

std::map<std::string, torch::Tensor> XposEncodingImpl::inspect(int64_t n, int64_t dim, const InspectParams& params) {
  auto out = RotaryEncodingImpl::inspect(n, dim, params);  // angles (and any rope scaling's frequencies)
  out["zeta"] = xpos_zeta(dim).to(torch::kFloat);                                                       // (dim/2,)
  out["scale"] = xpos_scale(xpos_centred(torch::arange(n, torch::kLong)), dim, scale_base_).to(torch::kFloat);  // (n, dim/2)
  return out;
}

// Specs are aggregates; the members a registration leaves out keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
// ---- registration (model/positional/registry.h) ----

// Rotary kinds turn pairs of a head's dims.
static void check_even_head(const PositionalOptions& o) {
  const int64_t head = o.n_embd / o.n_head;
  require_option(head % 2 == 0, "model.n_embd",
                 "such that the head size n_embd/n_head is even for " + o.encoding.kind + " (it rotates pairs; here " +
                     std::to_string(o.n_embd) + "/" + std::to_string(o.n_head) + " = " + std::to_string(head) + ")",
                 o.n_embd);
}

static const EncodingRegistrar kRope{
    {"rope", "rotary",
     [](const PositionalOptions& o) {
       const int64_t head = o.n_embd / o.n_head;
       return std::make_shared<RotaryEncodingImpl>(head, o.encoding.base, rotary_dims(head, o.encoding.rotary_fraction));
     },
     [](const PositionalOptions& o) {
       const double f = o.encoding.rotary_fraction;
       const int head = static_cast<int>(o.n_embd / o.n_head);
       require_option(f > 0 && f <= 1, "model.pos_encoding.rotary_fraction", "in (0, 1]", f);
       // Rotating part of a head (GPT-NeoX) takes an even count of its dims (rotary_dims rounds down), so an
       // odd head is fine there; rotating all of it needs an even head.
       if (f == 1) check_even_head(o);
       require_option(rotary_dims(head, f) >= 2, "model.pos_encoding.rotary_fraction",
                      "large enough to rotate at least one pair of the " + std::to_string(head) + " head dims", f);
     },
     {}, {}, /*listing=*/60}};
static const EncodingRegistrar kXpos{
    {"xpos", "rotary",
     [](const PositionalOptions& o) {
       return std::make_shared<XposEncodingImpl>(o.n_embd / o.n_head, o.encoding.base, o.encoding.scale_base);
     },
     [](const PositionalOptions& o) {
       check_even_head(o);
       require_option(o.encoding.scale_base > 0, "model.pos_encoding.scale_base", "positive", o.encoding.scale_base);
       // Training must stay finite: its scales overflow float past about 128 scale_base positions (the block, or
       // randomized positions up to randomize.max_position).
       const int64_t reach = std::max<int64_t>(o.block_size, o.encoding.randomize.max_position);
       const std::string over = reach > o.block_size ? "model.pos_encoding.randomize.max_position = " + std::to_string(reach) +
                                                           " positions"
                                                     : "model.block_size = " + std::to_string(reach) + " tokens";
       require_option(reach <= xpos_max_length(o.encoding.scale_base), "model.pos_encoding.scale_base",
                      "large enough that xPos's scales stay finite over " + over + " (at least " +
                          fmt_number(xpos_min_scale_base(reach)) + ")",
                      o.encoding.scale_base);
     },
     {}, {}, /*listing=*/80}};

}  // namespace poslab
