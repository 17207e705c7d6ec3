// Attention-bias family: ALiBi (Press et al. 2022) adds -m_h * (i - j) to the attention logits.
#pragma once
#include "model/positional/positional.h"

namespace poslab {

class AlibiEncodingImpl : public PositionalEncodingImpl {
 public:
  explicit AlibiEncodingImpl(int64_t n_head) : PositionalEncodingImpl("alibi"), slopes_(alibi_slopes(n_head)) {}
  std::string family() const override { return "bias"; }
  torch::Tensor bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) override;
  std::map<std::string, torch::Tensor> inspect(int64_t n, int64_t dim, const InspectParams& params) override;
  const std::vector<double>& slopes() const { return slopes_; }

 private:
  std::vector<double> slopes_;
};

}  // namespace poslab
