// Fuzzes the probe options an experiment file gives ("probes": {"passkey": {...}, "mqar": {...}}): every input
// is read or refused with a ConfigError, and what is read is in range and survives its own JSON round trip.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.h"
#include "probe/probe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the task name (a known one, or the rest of the input's first line).
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string task = data[0] % 3 == 0 ? "passkey" : data[0] % 3 == 1 ? "mqar" : text.substr(0, text.find('\n'));
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  try {
    auto o = poslab::probe_options_from_json(task, j, "probes." + task);
    if (o.trials <= 0 || o.threshold < 0 || o.threshold > 1) __builtin_trap();
    for (int L : o.lengths)
      if (L <= 0) __builtin_trap();
    for (double d : o.depths)
      if (!(d >= 0 && d <= 1)) __builtin_trap();
    auto again = poslab::probe_options_from_json(task, poslab::probe_options_to_json(o), "probes." + task);
    if (poslab::probe_options_to_json(again) != poslab::probe_options_to_json(o)) __builtin_trap();
  } catch (const poslab::ConfigError&) {
  }
  return 0;
}
