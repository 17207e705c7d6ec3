// T5, KERPLE, Sandwich and FIRE biases, each following its reference code (encodings-reference.md).
// Distances are q_pos - k_pos clamped at 0 (KERPLE's tril): future keys are masked anyway, and the
// clamp keeps logs and fractional powers finite there, so no NaN reaches a gradient.
#include "model/positional/relative_bias.h"

#include <cmath>

namespace poslab {

static torch::Tensor causal_distance(const torch::Tensor& q_pos, const torch::Tensor& k_pos) {
  return relative_distance(q_pos, k_pos).clamp_min(0);  // (t_q, t_k)
}

// ---- T5 ----

torch::Tensor t5_bucket(const torch::Tensor& distance, int num_buckets, int max_distance) {
  auto n = distance.to(torch::kLong).clamp_min(0);  // causal: n = max(i - j, 0)
  const int max_exact = num_buckets / 2;
  // float32 logs and truncation toward zero, as HF's `.to(torch.long)`; clamp first so log(0) never runs.
  auto large = torch::log(n.clamp_min(max_exact).to(torch::kFloat) / max_exact) /
               std::log(static_cast<double>(max_distance) / max_exact) * (num_buckets - max_exact);
  large = (large.to(torch::kLong) + max_exact).clamp_max(num_buckets - 1);
  return torch::where(n < max_exact, n, large);
}

T5BiasImpl::T5BiasImpl(int64_t n_head, int64_t n_embd, int num_buckets, int max_distance)
    : PositionalEncodingImpl("t5"), num_buckets_(num_buckets), max_distance_(max_distance) {
  // HF T5PreTrainedModel._init_weights: N(0, initializer_factor * d_model^-0.5).
  weight = register_parameter("weight", torch::randn({num_buckets, n_head}) / std::sqrt(static_cast<double>(n_embd)));
}

torch::Tensor T5BiasImpl::bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) {
  auto bucket = t5_bucket(relative_distance(q_pos, k_pos), num_buckets_, max_distance_);  // (t_q, t_k)
  return torch::embedding(weight, bucket).permute({2, 0, 1});                             // (H, t_q, t_k)
}

std::map<std::string, torch::Tensor> T5BiasImpl::inspect(int64_t n, int64_t, const InspectParams& params) {
  reject_params(params, {});
  torch::NoGradGuard no_grad;
  auto p = torch::arange(n, torch::kLong);
  return {{"buckets", t5_bucket(relative_distance(p, p), num_buckets_, max_distance_)}, {"bias", bias(p, p)}};
}

// ---- KERPLE ----

torch::Tensor kerple_bias(const torch::Tensor& distance, const torch::Tensor& r1, const torch::Tensor& r2, bool power) {
  auto d = distance.unsqueeze(0);                                      // (1, t_q, t_k)
  return power ? -r1 * torch::pow(d, r2) : -r1 * torch::log1p(r2 * d);  // (H, t_q, t_k)
}

KerpleBiasImpl::KerpleBiasImpl(bool power_variant, int64_t n_head)
    : PositionalEncodingImpl(power_variant ? "kerple_power" : "kerple_log"), power_(power_variant) {
  // Reference init: p ~ U(0, 2), a ~ U(0, 1); log: -p log(1 + a d), power: -a d^p.
  auto p = torch::rand({n_head, 1, 1}) * 2, a = torch::rand({n_head, 1, 1});
  r1 = register_parameter("r1", power() ? a : p);
  r2 = register_parameter("r2", power() ? p : a);
}

torch::Tensor KerpleBiasImpl::bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) {
  {
    // In place, on the values (not the graph), as the reference's `.data.clamp_`: every use sees them clamped.
    std::lock_guard<std::mutex> lock(clamp_mutex_);
    torch::NoGradGuard no_grad;
    const double eps = 1e-2;
    if ((r1 < eps).any().item<bool>()) r1.clamp_min_(eps);
    if ((r2 < eps).any().item<bool>() || (power() && (r2 > 2).any().item<bool>()))
      r2.clamp_(eps, power() ? 2.0 : std::numeric_limits<double>::infinity());
  }
  return kerple_bias(causal_distance(q_pos, k_pos), r1, r2, power());
}

std::map<std::string, torch::Tensor> KerpleBiasImpl::inspect(int64_t n, int64_t, const InspectParams& params) {
  reject_params(params, {"r1", "r2"});
  torch::NoGradGuard no_grad;
  auto p = torch::arange(n, torch::kLong);
  const auto H = r1.size(0);
  // Only values a model can hold: forward() keeps r1 >= 0.01 and r2 in [0.01, 2] (power) or >= 0.01 (log).
  const double r2_max = power() ? 2.0 : std::numeric_limits<double>::infinity();
  if (params.count("r1") && !(params.at("r1") >= 0.01))
    throw ConfigError("--param r1=" + std::to_string(params.at("r1")) + ": kerple keeps r1 at 0.01 or more");
  if (params.count("r2") && !(params.at("r2") >= 0.01 && params.at("r2") <= r2_max))
    throw ConfigError("--param r2=" + std::to_string(params.at("r2")) + ": kerple_" + std::string(power() ? "power" : "log") + " keeps r2 in [0.01, " +
                      (power() ? std::string("2]") : std::string("inf)")));
  auto a = params.count("r1") ? torch::full({H, 1, 1}, params.at("r1")) : r1.detach();
  auto b = params.count("r2") ? torch::full({H, 1, 1}, params.at("r2")) : r2.detach();
  return {{"bias", kerple_bias(causal_distance(p, p), a, b, power())}, {"r1", a.flatten()}, {"r2", b.flatten()}};
}

// ---- Sandwich ----

torch::Tensor sandwich_bias(const torch::Tensor& distance, int64_t n_head, int64_t head_dim, double base) {
  // (sum_{k=1..D/2} cos(n base^(-2k/D)) - D/2) / (h * 8 / H), h = 1..H (NeMo; k starts at 1).
  auto k = torch::arange(1, head_dim / 2 + 1, torch::kDouble);
  auto inv_freq = torch::pow(torch::tensor(base, torch::kDouble), -2.0 * k / static_cast<double>(head_dim));  // (D/2,)
  auto angles = distance.to(torch::kDouble).unsqueeze(-1) * inv_freq.to(distance.device());  // (t_q, t_k, D/2)
  auto numerator = angles.cos().sum(-1) - static_cast<double>(head_dim / 2);                  // (t_q, t_k)
  auto h = torch::arange(1, n_head + 1, torch::kDouble).to(distance.device()).view({-1, 1, 1});
  return (numerator.unsqueeze(0) / (h * 8.0 / static_cast<double>(n_head))).to(torch::kFloat);  // (H, t_q, t_k)
}

torch::Tensor SandwichBiasImpl::bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) {
  return sandwich_bias(causal_distance(q_pos, k_pos), n_head_, head_dim_, base_);
}

std::map<std::string, torch::Tensor> SandwichBiasImpl::inspect(int64_t n, int64_t dim, const InspectParams& params) {
  reject_params(params, {});
  auto p = torch::arange(n, torch::kLong);
  return {{"bias", sandwich_bias(causal_distance(p, p), n_head_, dim, base_)}};  // `pe --dim` is the head size
}

// ---- FIRE ----

torch::Tensor fire_input(const torch::Tensor& distance, const torch::Tensor& q_pos, const torch::Tensor& c,
                         const torch::Tensor& L) {
  // mcleish7/arithmetic's FIRE: num = log(|c rel| + 1), den = log(|c max(i, L)| + 1), x = num / (den + eps).
  auto num = torch::log(torch::abs(c * distance) + 1);                                             // (t_q, t_k)
  auto den = torch::log(torch::abs(c * torch::maximum(q_pos.to(torch::kFloat).view({-1, 1}), L)) + 1);  // (t_q, 1)
  return num / (den + 1e-6);
}

FireBiasImpl::FireBiasImpl(int64_t n_head, int mlp_width, double init_c, double init_L)
    : PositionalEncodingImpl("fire"), init_L_(init_L) {
  mlp_in = register_module("mlp_in", torch::nn::Linear(1, mlp_width));
  mlp_out = register_module("mlp_out", torch::nn::Linear(mlp_width, n_head));
  c = register_parameter("c", torch::tensor(init_c, torch::kFloat));
  L_multiplier = register_parameter("L_multiplier", torch::tensor(1.0f));
}

torch::Tensor FireBiasImpl::bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) {
  auto x = fire_input(causal_distance(q_pos, k_pos), q_pos, c, torch::abs(L_multiplier * init_L_));  // (t_q, t_k)
  return mlp_out(torch::relu(mlp_in(x.unsqueeze(-1)))).permute({2, 0, 1});                         // (H, t_q, t_k)
}

std::map<std::string, torch::Tensor> FireBiasImpl::inspect(int64_t n, int64_t, const InspectParams& params) {
  reject_params(params, {"c", "L"});
  // A model's threshold is |L_multiplier x init_L|: a negative L is no state a model can hold.
  if (params.count("L") && !(params.at("L") > 0))
    throw ConfigError("--param L=" + std::to_string(params.at("L")) + ": fire's threshold L is positive (a model holds "
                      "|L_multiplier x init_L|)");
  torch::NoGradGuard no_grad;
  auto p = torch::arange(n, torch::kLong);
  auto cc = params.count("c") ? torch::tensor(params.at("c")).to(torch::kFloat) : c.detach();
  auto L = params.count("L") ? torch::tensor(params.at("L")).to(torch::kFloat) : torch::abs(L_multiplier * init_L_);
  return {{"fire_input", fire_input(causal_distance(p, p), p, cc, L)}};
}

// Specs are aggregates; the members a registration leaves out keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
// ---- registration (model/positional/registry.h) ----

static const EncodingRegistrar kT5{
    {"t5", "bias",
     [](const PositionalOptions& o) {
       return std::make_shared<T5BiasImpl>(o.n_head, o.n_embd, o.encoding.num_buckets, o.encoding.max_distance);
     },
     [](const PositionalOptions& o) {
       const auto& e = o.encoding;
       require_option(e.num_buckets >= 2, "model.pos_encoding.num_buckets", "at least 2", e.num_buckets);
       require_option(e.max_distance > e.num_buckets / 2, "model.pos_encoding.max_distance",
                      "> num_buckets/2 (" + std::to_string(e.num_buckets / 2) + ", the exact buckets)", e.max_distance);
     },
     {}, {}, /*listing=*/90}};
static const EncodingRegistrar kKerpleLog{
    {"kerple_log", "bias",
     [](const PositionalOptions& o) { return std::make_shared<KerpleBiasImpl>(/*power=*/false, o.n_head); },
     {}, {}, {}, /*listing=*/100}};
static const EncodingRegistrar kKerplePower{
    {"kerple_power", "bias",
     [](const PositionalOptions& o) { return std::make_shared<KerpleBiasImpl>(/*power=*/true, o.n_head); },
     {}, {}, {}, /*listing=*/110}};
static const EncodingRegistrar kSandwich{
    {"sandwich", "bias",
     [](const PositionalOptions& o) {
       return std::make_shared<SandwichBiasImpl>(o.n_head, o.n_embd / o.n_head, o.encoding.base);
     },
     {}, {}, {}, /*listing=*/120}};
static const EncodingRegistrar kFire{
    {"fire", "bias",
     [](const PositionalOptions& o) {
       const auto& e = o.encoding;
       return std::make_shared<FireBiasImpl>(o.n_head, e.mlp_width, e.init_c, e.init_L);
     },
     [](const PositionalOptions& o) {
       const auto& e = o.encoding;
       require_option(e.mlp_width >= 1, "model.pos_encoding.mlp_width", "positive", e.mlp_width);
       require_option(e.init_c > 0, "model.pos_encoding.init_c", "positive", e.init_c);
       require_option(e.init_L > 0, "model.pos_encoding.init_L", "positive", e.init_L);
     },
     {}, {}, /*listing=*/130}};

}  // namespace poslab
