// Key-token loss (after LongPPL, Fang et al. 2024): perplexity averages away the few tokens that need
// distant context. Key tokens are the targets whose loss falls by more than a margin when the model sees
// its whole window instead of only its last S tokens; their loss is reported beside the plain loss.
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "config/config.h"
#include "data/corpus.h"

namespace poslab {

struct KeyTokenOptions {
  int64_t short_context = 0;  // S tokens; 0 = off
  double margin = 1.0;        // nats
};

// eval.key_short (0 = a quarter of the training length) and eval.key_margin; off for tasks.
KeyTokenOptions key_token_options(const Config& config, const Corpus& corpus);

// Over the targets scored in both (non-NaN in both vectors, indexed by target): the key tokens are those
// with short - full > margin. {"short_context", "margin", "count", "fraction", "loss" (mean full-window loss
// over key tokens, null when none), "short_loss" (their mean short-context loss)}.
nlohmann::json key_token_stats(const std::vector<double>& full_nll, const std::vector<double>& short_nll,
                               const KeyTokenOptions& options);

// The same statistics over targets added a chunk at a time (full and short aligned by target).
struct KeyTokenAccumulator {
  KeyTokenOptions options;
  int64_t both = 0, count = 0;
  double loss = 0, short_loss = 0;
  void add(const std::vector<double>& full_nll, const std::vector<double>& short_nll);
  nlohmann::json result() const;
};

}  // namespace poslab
