// Additive family: a vector added to the token embedding. none, index, binary, sinusoidal, learned.
#include "model/positional/additive.h"

#include <algorithm>
#include <cmath>

namespace poslab {

torch::Tensor sinusoidal_table(int64_t n, int64_t d, double base) {
  return sinusoidal_rows(torch::arange(n, torch::kLong), d, base);
}

torch::Tensor sinusoidal_rows(const torch::Tensor& positions, int64_t d, double base) {
  const int64_t n = positions.numel();
  auto pos = positions.to(torch::kCPU, torch::kDouble).view({-1, 1});         // (n, 1)
  auto two_i = torch::arange(0, d, 2, torch::kDouble);                          // (d/2,)
  auto angle = pos / torch::pow(torch::tensor(base, torch::kDouble), two_i / static_cast<double>(d));  // (n, d/2)
  // Interleave: column 2i is sin, 2i+1 is cos (Vaswani et al.), computed in double then cast.
  return torch::stack({torch::sin(angle), torch::cos(angle)}, /*dim=*/2).reshape({n, d}).to(torch::kFloat);
}

torch::Tensor binary_table(int64_t n, int64_t d, int bits, bool signed_bits) {
  return binary_rows(torch::arange(n, torch::kLong), d, bits, signed_bits);
}

torch::Tensor binary_rows(const torch::Tensor& positions, int64_t d, int bits, bool signed_bits) {
  const int64_t n = positions.numel();
  auto pos = positions.to(torch::kCPU, torch::kLong).view({-1, 1});                           // (n, 1)
  auto bit = torch::bitwise_and(torch::bitwise_right_shift(pos, torch::arange(bits, torch::kLong)), 1)
                 .to(torch::kFloat);                                                           // (n, bits)
  if (signed_bits) bit = bit * 2 - 1;
  auto table = torch::zeros({n, d});
  table.slice(1, 0, bits).copy_(bit);
  return table;
}

void PositionalEncodingImpl::reject_params(const InspectParams& params, const std::vector<std::string>& known) const {
  for (const auto& [name, value] : params)
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw ConfigError("--param " + name + ": not a parameter of " + kind() +
                        (known.empty() ? " (it takes none)" : " (known: " + list + ")"));
    }
}

std::map<std::string, torch::Tensor> PositionalEncodingImpl::inspect(int64_t n, int64_t dim, const InspectParams& params) {
  reject_params(params, {});
  torch::NoGradGuard no_grad;
  check_length(n);
  const auto p = torch::arange(n, torch::kLong);
  // By family, from the hook the family uses, so a kind without an inspect() of its own (a plug-in's, say)
  // still shows what it does: an additive table, a bias per head; a rotary kind's q.k comes from poslab pe.
  if (family() == "additive") return {{"table", embed(torch::zeros({1, n, dim}), p).squeeze(0).detach()}};  // (n, dim)
  if (family() == "bias")
    if (const auto b = bias(p, p); b.defined()) return {{"bias", b.detach().to(torch::kFloat)}};  // (H, n, n)
  return {};
}

torch::Tensor IndexEncodingImpl::embed(const torch::Tensor& x, const torch::Tensor& positions) {
  // The same value p*scale in every component: a pre-LayerNorm block subtracts it again (see docs).
  auto offset = (positions.to(x.scalar_type()) * scale_).view({1, -1, 1});  // (1, T, 1)
  return x + offset;
}

torch::Tensor TableEncodingImpl::embed(const torch::Tensor& x, const torch::Tensor& positions) {
  const int64_t needed = positions.numel() ? positions.max().item<int64_t>() + 1 : 0;
  if (sparse_positions(needed, positions.numel())) {
    // A table up to the largest would hold billions of rows (117 GiB at 2e9): these positions' rows alone,
    // the same numbers the table holds.
    return x + (make_rows(positions) * scale_).to(x.device()).unsqueeze(0).to(x.scalar_type());  // (1, T, C)
  }
  torch::Tensor table;
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (!cache_.defined() || cache_.size(0) < needed || cache_.device() != x.device()) {
      // Grow geometrically so evaluation sweeps over many lengths build the table once or twice.
      int64_t rows = std::max<int64_t>(needed, cache_.defined() ? 2 * cache_.size(0) : needed);
      if (max_positions() >= 0) rows = std::min<int64_t>(rows, max_positions());
      cache_ = (make_table(rows) * scale_).to(x.device());
    }
    table = cache_;
  }
  return x + table.index_select(0, positions).unsqueeze(0).to(x.scalar_type());  // (1, T, C)
}

LearnedEncodingImpl::LearnedEncodingImpl(int64_t block_size, int64_t n_embd) : PositionalEncodingImpl("learned") {
  weight = register_parameter("weight", torch::randn({block_size, n_embd}) * 0.02);
}

torch::Tensor LearnedEncodingImpl::embed(const torch::Tensor& x, const torch::Tensor& positions) {
  return x + weight.index_select(0, positions).unsqueeze(0);  // (1, T, C)
}

// Specs are aggregates; the members a registration leaves out keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
// ---- registration: each kind under its name (model/positional/registry.h) ----

static double one_over_sqrt_width(int64_t n_embd) { return 1.0 / std::sqrt(static_cast<double>(n_embd)); }

static const EncodingRegistrar kNone{{"none", "none", [](const PositionalOptions&) {
                                        return std::make_shared<NoEncodingImpl>();
                                      }, {}, {}, {}, /*listing=*/10}};
static const EncodingRegistrar kIndex{{"index", "additive",
                                       [](const PositionalOptions& o) { return std::make_shared<IndexEncodingImpl>(additive_scale(o)); },
                                       {}, [](int64_t) { return 1.0; }, {}, /*listing=*/20}};
static const EncodingRegistrar kBinary{
    {"binary", "additive",
     [](const PositionalOptions& o) {
       return std::make_shared<BinaryEncodingImpl>(o.n_embd, o.encoding.bits, o.encoding.signed_bits, additive_scale(o));
     },
     [](const PositionalOptions& o) {
       require_option(o.encoding.bits >= 1 && o.encoding.bits <= std::min<int64_t>(30, o.n_embd), "model.pos_encoding.bits",
                      "between 1 and min(30, model.n_embd = " + std::to_string(o.n_embd) + ")", o.encoding.bits);
     },
     one_over_sqrt_width, {}, /*listing=*/30}};
static const EncodingRegistrar kSinusoidal{
    {"sinusoidal", "additive",
     [](const PositionalOptions& o) {
       return std::make_shared<SinusoidalEncodingImpl>(o.n_embd, o.encoding.base, additive_scale(o));
     },
     [](const PositionalOptions& o) {
       require_option(o.n_embd % 2 == 0, "model.n_embd", "even for sinusoidal (sin/cos pairs)", o.n_embd);
     },
     one_over_sqrt_width, {}, /*listing=*/40}};
// Randomized positions reach max_position - 1: the table needs that many rows.
static const EncodingRegistrar kLearned{{"learned", "additive",
                                         [](const PositionalOptions& o) {
                                           const auto& r = o.encoding.randomize;
                                           return std::make_shared<LearnedEncodingImpl>(
                                               r.max_position > 0 ? r.max_position : o.block_size, o.n_embd);
                                         },
                                         {}, {}, {}, /*listing=*/50}};

}  // namespace poslab
