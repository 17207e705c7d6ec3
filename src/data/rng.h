// A tiny deterministic RNG (SplitMix64). std:: distributions differ between standard libraries;
// this one gives the same examples from the same seed on every machine, and its state is one
// integer, so checkpoints restore the data order exactly.
#pragma once
#include <cstdint>

namespace poslab {

struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed = 0) : state(seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL) {}
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform integer in [0, n), n > 0; rejection sampling removes modulo bias.
  int64_t below(int64_t n) {
    const uint64_t un = static_cast<uint64_t>(n);
    const uint64_t limit = UINT64_MAX - UINT64_MAX % un;
    uint64_t r;
    do r = next(); while (r >= limit);
    return static_cast<int64_t>(r % un);
  }
  int64_t between(int64_t lo, int64_t hi) { return lo + below(hi - lo + 1); }  // inclusive
};

}  // namespace poslab
