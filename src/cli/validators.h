// Option validators whose messages state the allowed values in words ("--tokens: must be a positive
// integer, got 0"), where CLI11's own Range prints its bounds as 300-digit numbers.
#pragma once
#include <CLI/CLI.hpp>

#include <cmath>
#include <string>

namespace poslab::cli {

// An integer >= `min`; `words` says it, e.g. "a positive integer".
inline CLI::Validator integer_at_least(long long min, const std::string& words) {
  return CLI::Validator(
      [min, words](std::string& input) -> std::string {
        long long value = 0;
        if (!CLI::detail::lexical_cast(input, value) || value < min) return "must be " + words + ", got '" + input + "'";
        return {};
      },
      words);
}
inline CLI::Validator positive_integer() { return integer_at_least(1, "a positive integer"); }

// A number in [min, inf) (or (min, inf) when `strict`); `words` says it.
inline CLI::Validator number_at_least(double min, bool strict, const std::string& words) {
  return CLI::Validator(
      [min, strict, words](std::string& input) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(input, value) || !std::isfinite(value) || value < min || (strict && value == min))
          return "must be " + words + ", got '" + input + "'";
        return {};
      },
      words);
}

}  // namespace poslab::cli
