// Human-readable durations and rates for progress lines, and the clock that spaces such lines out.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

namespace poslab {

inline std::string format_duration(double seconds) {
  if (!(seconds >= 0)) return "?";
  char buf[32];
  const long s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

inline std::string format_rate(double per_second) {
  char buf[32];
  if (per_second >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", per_second / 1e6);
  else if (per_second >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk", per_second / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", per_second);
  return buf;
}

// Long work (a 100,000-token evaluation, a probe at such lengths) says it is moving with a line at most
// every `seconds`, and short work stays quiet: due() is true once that long has passed since the last
// true (or since the start), and starts the wait again.
class Ticker {
 public:
  explicit Ticker(double seconds) : seconds_(seconds), start_(Clock::now()), last_(start_) {}
  bool due() {
    const auto now = Clock::now();
    if (std::chrono::duration<double>(now - last_).count() < seconds_) return false;
    last_ = now;
    return true;
  }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  double seconds_;
  Clock::time_point start_, last_;
};

}  // namespace poslab
