// Key tokens: the targets a window's longer context helps by more than a margin, and their loss.
#include "eval/key_tokens.h"

#include <cmath>

namespace poslab {

KeyTokenOptions key_token_options(const Config& c, const Corpus& corpus) {
  KeyTokenOptions o;
  if (corpus.is_task() || c.eval.key_short < 0) return o;
  o.short_context = c.eval.key_short > 0 ? c.eval.key_short : std::max(1, corpus.train_length() / 4);
  o.margin = c.eval.key_margin;
  return o;
}

void KeyTokenAccumulator::add(const std::vector<double>& full, const std::vector<double>& shrt) {
  for (size_t t = 0; t < std::min(full.size(), shrt.size()); ++t) {
    if (std::isnan(full[t]) || std::isnan(shrt[t])) continue;
    ++both;
    if (shrt[t] - full[t] > options.margin) ++count, loss += full[t], short_loss += shrt[t];
  }
}

nlohmann::json KeyTokenAccumulator::result() const {
  return {{"short_context", options.short_context},
          {"margin", options.margin},
          {"count", count},
          {"fraction", both ? static_cast<double>(count) / static_cast<double>(both) : 0.0},
          {"loss", count ? nlohmann::json(loss / static_cast<double>(count)) : nlohmann::json(nullptr)},
          {"short_loss", count ? nlohmann::json(short_loss / static_cast<double>(count)) : nlohmann::json(nullptr)}};
}

nlohmann::json key_token_stats(const std::vector<double>& full, const std::vector<double>& shrt, const KeyTokenOptions& o) {
  KeyTokenAccumulator acc;
  acc.options = o;
  acc.add(full, shrt);
  return acc.result();
}

}  // namespace poslab
