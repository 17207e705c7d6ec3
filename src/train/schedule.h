// Learning rate: linear warmup, then cosine decay to min_lr at lr_decay_iters (nanoGPT's schedule).
#pragma once
#include <cmath>

#include "config/config.h"

namespace poslab {

inline double learning_rate_at(const TrainConfig& t, int64_t step) {
  if (step < t.warmup_iters) return t.learning_rate * static_cast<double>(step + 1) / (t.warmup_iters + 1);
  const int decay_iters = t.lr_decay_iters > 0 ? t.lr_decay_iters : t.max_iters;
  if (step >= decay_iters) return t.min_lr;
  const double progress = static_cast<double>(step - t.warmup_iters) / std::max(1, decay_iters - t.warmup_iters);
  const double coeff = 0.5 * (1.0 + std::cos(M_PI * progress));  // 1 -> 0
  return t.min_lr + coeff * (t.learning_rate - t.min_lr);
}

}  // namespace poslab
