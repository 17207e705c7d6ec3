// The statistics of retrieval probes: Wilson score intervals for a success rate, and the effective
// length (after RULER, NVIDIA/RULER): how far a model retrieves reliably.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace poslab {

// The Wilson score interval (Wilson 1927) for `successes` out of `trials` at normal quantile z
// (1.96: 95%). {0, 1} for no trials.
std::pair<double, double> wilson_interval(int64_t successes, int64_t trials, double z = 1.959963984540054);

// Exact-match counts at one tested length, pooled over its depths.
struct LengthScore {
  int length = 0;
  int64_t successes = 0, trials = 0;
};
// The largest tested length L such that at every tested length up to L the lower Wilson bound of exact
// match is at least `threshold`; 0 when the shortest tested length already falls short. A dip stops it:
// a longer length that recovers does not count.
int effective_length(std::vector<LengthScore> scores, double threshold);

}  // namespace poslab
