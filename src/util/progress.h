// Human-readable durations and rates for progress lines.
#pragma once
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

}  // namespace poslab
