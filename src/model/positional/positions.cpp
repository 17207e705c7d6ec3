// The positions every hook receives: 0..T-1, or randomized (Ruoss et al. 2023, the deepmind code's
// `sort(choice(arange(L_max), seq_len, replace=False))`), and the length limit that follows from them.
#include "model/positional/positional.h"

#include <algorithm>
#include <set>
#include <vector>

#include "data/rng.h"

namespace poslab {

void PositionalEncodingImpl::set_rope_scaling(const RopeScaling& scaling) {
  if (scaling.active())
    throw ConfigError("rope scaling '" + scaling.kind + "' applies to rotary encodings (rope, xpos), not to '" + kind() +
                      "', which has no rotary frequencies to stretch");
}

void PositionalEncodingImpl::check_length(int64_t length) const {
  const int64_t limit = max_positions();
  if (limit >= 0 && length > limit)
    throw PositionLimitError(kind() + " table has " + std::to_string(limit) + " positions");
  // Sampling without replacement cannot draw more positions than there are.
  if (randomize_eval_ && randomize_max_ > 0 && length > randomize_max_)
    throw PositionLimitError("randomized positions: " + std::to_string(length) + " tokens > randomize.max_position " +
                             std::to_string(randomize_max_));
}

// T of [0, N) without replacement, uniformly (Floyd's algorithm: O(T), whatever N is), sorted: (T,) int64.
// `below_or_at(j)` draws a number in [0, j], one call per j = N-T .. N-1 in turn.
template <class Draw>
static torch::Tensor floyd_sample(int64_t N, int64_t T, Draw below_or_at) {
  std::set<int64_t> drawn;
  for (int64_t j = N - T; j < N; ++j) {
    const int64_t t = below_or_at(j);
    drawn.insert(drawn.count(t) ? j : t);
  }
  const std::vector<int64_t> draw(drawn.begin(), drawn.end());  // sorted
  return torch::tensor(draw, torch::kLong);
}

int64_t PositionalEncodingImpl::eval_length_limit() const {
  const int64_t limit = max_positions();
  if (!randomizes(/*training=*/false)) return limit;
  return limit < 0 ? randomize_max_ : std::min(limit, randomize_max_);
}

bool PositionalEncodingImpl::kv_cacheable(int64_t length) const {
  // A randomized draw at evaluation gives every forward new positions: no cached key stays valid.
  // A bounded table (learned) slides its window past max_positions(), moving every key's position.
  const int64_t limit = max_positions();
  return !randomizes(/*training=*/false) && (limit < 0 || length <= limit);
}

torch::Tensor PositionalEncodingImpl::positions(int64_t T, bool training, const torch::Device& device) const {
  if (!randomizes(training)) return torch::arange(T, torch::TensorOptions().dtype(torch::kLong).device(device));
  if (T > randomize_max_)
    throw PositionLimitError("randomized positions: " + std::to_string(T) + " tokens > randomize.max_position " +
                             std::to_string(randomize_max_));
  // One draw per forward pass, shared by the whole batch (as the reference code); on the CPU generator.
  if (randomize_max_ <= kRandpermMaxPosition) {
    auto draw = torch::randperm(randomize_max_, torch::kLong).slice(0, 0, T);
    return std::get<0>(draw.sort()).to(device);  // (T,) sorted, distinct, < max_position
  }
  // A permutation of max_position numbers every step costs its time and memory (20M: 18 s and 5 GB for 10
  // steps; 2^31 ran out of memory): past kRandpermMaxPosition, Floyd's algorithm, O(T), with its T uniform
  // numbers drawn at once from the same generator, so the checkpoint's RNG state still resumes it exactly.
  const auto u = torch::rand({T}, torch::kDouble);  // (T,) in [0, 1)
  const double* up = u.data_ptr<double>();
  int64_t i = 0;
  return floyd_sample(randomize_max_, T, [&](int64_t j) {  // [0, j]
           return std::min<int64_t>(j, static_cast<int64_t>(up[i++] * static_cast<double>(j + 1)));
         }).to(device);
}

torch::Tensor PositionalEncodingImpl::eval_positions(const torch::Tensor& tokens) const {
  const int64_t T = tokens.numel();
  if (T > randomize_max_)
    throw PositionLimitError("randomized positions: " + std::to_string(T) + " tokens > randomize.max_position " +
                             std::to_string(randomize_max_));
  // The seed: the length, then every token, each mixed through SplitMix64's finaliser.
  const auto ids = tokens.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t* p = ids.data_ptr<int64_t>();
  Rng mix(static_cast<uint64_t>(T));
  uint64_t seed = mix.next();
  for (int64_t i = 0; i < T; ++i) seed = Rng(seed ^ static_cast<uint64_t>(p[i])).next();
  Rng rng(seed);
  return floyd_sample(randomize_max_, T, [&](int64_t j) { return static_cast<int64_t>(rng.below(j + 1)); })
      .to(tokens.device());
}

}  // namespace poslab
