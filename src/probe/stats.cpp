// Wilson intervals and the effective-length rule.
#include "probe/stats.h"

#include <algorithm>
#include <cmath>

namespace poslab {

std::pair<double, double> wilson_interval(int64_t successes, int64_t trials, double z) {
  if (trials <= 0) return {0.0, 1.0};
  const double n = static_cast<double>(trials), p = static_cast<double>(successes) / n, z2 = z * z;
  const double centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = z / (1 + z2 / n) * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n));
  // At p = 0 (p = 1) the lower (upper) end is p itself; computed, it is off by rounding (1.4e-17 for 0 of 24).
  return {successes == 0 ? 0.0 : std::max(0.0, centre - half), successes == trials ? 1.0 : std::min(1.0, centre + half)};
}

int effective_length(std::vector<LengthScore> scores, double threshold) {
  std::sort(scores.begin(), scores.end(), [](const auto& a, const auto& b) { return a.length < b.length; });
  int best = 0;
  for (const auto& s : scores) {
    if (wilson_interval(s.successes, s.trials).first < threshold) break;
    best = s.length;
  }
  return best;
}

}  // namespace poslab
