// Evaluation-time RoPE scaling: the rotary frequencies (and YaRN's attention factor) for a model
// trained at `original_length` and run longer, with the formulas of Hugging Face's
// modeling_rope_utils: linear (Position Interpolation), ntk, dynamic_ntk and yarn.
#pragma once
#include <torch/types.h>

#include <string>
#include <vector>

#include "config/config.h"

namespace poslab {

struct RopeScaling {
  std::string kind = "none";    // none | linear | ntk | dynamic_ntk | yarn
  double factor = 1.0;          // s
  int64_t original_length = 0;  // L: the training length in tokens (0: the run's block_size)
  double beta_fast = 32.0;      // yarn: pairs turning more than this often within L keep their frequency
  double beta_slow = 1.0;       // yarn: pairs turning less than this are fully interpolated
  bool active() const { return kind != "none"; }
};

extern const std::vector<std::string> kRopeScalingKinds;

struct RopeFrequencies {
  torch::Tensor inv_freq;         // (head_dim/2,) double: the angle per position of each pair
  double attention_factor = 1.0;  // cos and sin are multiplied by it (yarn), so logits by its square
};

// The default RoPE frequencies base^(-2k/d), k = 0..d/2-1, under `scaling`. `seq_len` is the length
// being evaluated (only dynamic_ntk depends on it). Throws std::invalid_argument on a bad setting.
RopeFrequencies rope_frequencies(int64_t head_dim, double base, const RopeScaling& scaling, int64_t seq_len);

// The config's section as a scaling; original_length 0 becomes `default_length`.
RopeScaling to_rope_scaling(const RopeScalingConfig& config, int64_t default_length);

// Checks kind, factor >= 1 and original_length > 0; `where` prefixes the message (a key or a flag).
void validate_rope_scaling(const RopeScaling& scaling, const std::string& where);

}  // namespace poslab
