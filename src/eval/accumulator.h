// Evaluation's sums over scored targets: loss, token accuracy, exact match and the loss at each
// position, added a batch of scores at a time; and the row of a length that cannot be evaluated.
// Shared by the task evaluation (eval/evaluator.cpp) and the text one (eval/text_eval.cpp).
#pragma once
#include "util/torch_api.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/evaluator.h"

namespace poslab {

// The sums of one length (one protocol), over the targets each add() selects.
struct Accumulator {
  double loss_sum = 0;
  int64_t scored = 0, correct = 0, examples = 0, exact = 0;
  std::vector<double> pos_loss;
  std::vector<int64_t> pos_count;

  // Adds the scores where `mask` (B, T) is true; each row is one example for exact match.
  void add(const Scores& s, const torch::Tensor& mask) {
    const int64_t T = s.nll.size(1);
    if (static_cast<int64_t>(pos_loss.size()) < T) pos_loss.resize(T, 0.0), pos_count.resize(T, 0);
    auto nll = s.nll * mask, hit = s.hit.logical_and(mask);  // (B, T)
    loss_sum += nll.sum().item<double>();
    scored += mask.sum().item<int64_t>();
    correct += hit.sum().item<int64_t>();
    // An example is exactly right when every scored token is: (hits == scored) per row.
    auto row_ok = hit.sum(1).eq(mask.sum(1)).logical_and(mask.sum(1).gt(0));
    exact += row_ok.sum().item<int64_t>();
    examples += s.nll.size(0);
    auto pl = nll.sum(0).contiguous(), pc = mask.sum(0).to(torch::kLong).contiguous();
    auto pla = pl.accessor<double, 1>();
    auto pca = pc.accessor<int64_t, 1>();
    for (int64_t t = 0; t < T; ++t) pos_loss[t] += pla[t], pos_count[t] += pca[t];
  }

  nlohmann::json result(bool with_exact) const {
    const double loss = scored ? loss_sum / scored : NAN;
    using nlohmann::json;
    json r = {{"status", "ok"},
              {"loss", loss},
              {"ppl", std::exp(loss)},
              {"token_acc", scored ? static_cast<double>(correct) / scored : 0.0},
              {"exact_match", with_exact && examples ? json(static_cast<double>(exact) / examples) : json(nullptr)},
              {"scored_tokens", scored}};
    json curve = json::array();
    for (size_t t = 0; t < pos_loss.size(); ++t) curve.push_back(pos_count[t] ? json(pos_loss[t] / pos_count[t]) : json(nullptr));
    r["position_loss"] = curve;
    return r;
  }
};

inline nlohmann::json not_applicable(int length, int64_t tokens, const std::string& why) {
  using nlohmann::json;
  return json{{"length", length},       {"tokens", tokens},      {"status", "n/a: " + why}, {"loss", nullptr},
              {"ppl", nullptr},         {"token_acc", nullptr}, {"exact_match", nullptr},  {"scored_tokens", nullptr},
              {"position_loss", json::array()}};
}

}  // namespace poslab
