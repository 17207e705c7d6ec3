// A poslab plug-in: a learned Gaussian distance bias, an encoding poslab does not have. Head h adds
// -(i - j)^2 / (2 sigma_h^2) to the attention logit of query i and key j, with a trained width sigma_h per
// head; built as a shared library against an installed poslab and named in a config (docs/extending.md).
#include <poslab/model/positional/plugin.h>

#include <cmath>
#include <memory>

namespace {
using poslab::InspectParams;
using poslab::PositionalEncodingImpl;
using poslab::PositionalOptions;

class GaussianBiasImpl : public PositionalEncodingImpl {
 public:
  GaussianBiasImpl(int64_t n_head, double sigma) : PositionalEncodingImpl("gaussian_bias") {
    // Head h starts at width sigma * 2^h: narrow heads see the next few tokens, wide ones further back.
    // The width is trained as its logarithm, so it stays positive.
    auto widths = sigma * torch::pow(2.0, torch::arange(n_head, torch::kFloat));  // (H,)
    log_sigma = register_parameter("log_sigma", widths.log().view({n_head, 1, 1}));  // (H, 1, 1)
  }
  std::string family() const override { return "bias"; }
  bool constant_bias() const override { return false; }  // it has parameters: recomputed every step

  // q_pos (t_q,), k_pos (t_k,) int64 -> (H, t_q, t_k); keys after the query are masked by the model.
  torch::Tensor bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) override {
    auto distance = (q_pos.unsqueeze(1) - k_pos.unsqueeze(0)).to(log_sigma.dtype());  // (t_q, t_k)
    auto sigma = log_sigma.exp();                                                    // (H, 1, 1)
    return -0.5 * (distance / sigma).pow(2);                                         // (H, t_q, t_k)
  }

  // What `poslab pe --kind gaussian_bias` prints: the widths and the bias over n positions.
  std::map<std::string, torch::Tensor> inspect(int64_t n, int64_t dim, const InspectParams& params) override {
    reject_params(params, {});
    torch::NoGradGuard no_grad;
    auto p = torch::arange(n, torch::kLong);
    return {{"sigma", log_sigma.exp().flatten()}, {"bias", bias(p, p)}};  // (H,), (H, n, n)
  }

  torch::Tensor log_sigma;  // (H, 1, 1)
};

// The plug-in's option, read from model.pos_encoding.gauss_sigma (its default is declared below).
double sigma_option(const PositionalOptions& o) { return o.encoding.options.at("gauss_sigma").get<double>(); }

}  // namespace

POSLAB_PLUGIN(registrar) {
  poslab::EncodingSpec spec;
  spec.kind = "gaussian_bias";
  spec.family = "bias";
  spec.options = {{"gauss_sigma", 4.0}};  // its keys beside the built-in ones, with their defaults
  spec.check = [](const PositionalOptions& o) {
    const double sigma = sigma_option(o);
    poslab::require_option(std::isfinite(sigma) && sigma > 0, "model.pos_encoding.gauss_sigma", "a positive number", sigma);
  };
  spec.make = [](const PositionalOptions& o) { return std::make_shared<GaussianBiasImpl>(o.n_head, sigma_option(o)); };
  registrar.add(std::move(spec));
}
