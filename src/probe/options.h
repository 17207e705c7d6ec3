// A probe's options (passkey or mqar), as `poslab probe` flags and an experiment's "probes" give them:
// reading and checking them, the run's defaults for the ones left unset, and whether a probe file on disk
// is the one these options would write (compare redoes a cell's probe when it is not).
#pragma once
#include <nlohmann/json.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace poslab {

extern const std::vector<std::string> kProbeTasks;  // passkey, mqar
extern const std::vector<double> kDefaultDepths;     // passkey depths when none are given: 0, 0.25, 0.5, 0.75

struct ProbeOptions {
  std::string task = "passkey";
  std::vector<int> lengths;    // tokens; empty: passkey: the run's evaluation lengths, mqar: 1, 2, 4, 8x its training length
  std::vector<double> depths;  // passkey; empty: 0, 0.25, 0.5, 0.75
  int trials = 50;             // per (length, depth) cell
  std::string haystack = "noise";  // noise | text (held-out text of the run's corpus)
  bool no_needle = false;      // every cell without its needle: chance level
  bool controls = true;        // passkey: add depth 1 (needle next to the question) and no-needle rows per length
  double threshold = 0.85;     // effective length: lower Wilson bound of exact match
  int seed = 1;
  int digits = 0;              // passkey key digits; 0: the run's data.probes.passkey.digits
  std::string template_name;   // "": the run's data.probes.passkey.template
  bool quiet = false;          // no per-length progress lines
  int threads = 0;             // 0: the run's train.threads (compare gives the whole machine to a probe)
  // true (poslab probe --lengths): a length too short for the template is refused before any work
  // (ConfigError naming --lengths); false (the run's own lengths, or compare, where one grid serves every
  // encoding): it is reported n/a. A length the encoding cannot take (past a learned table) is n/a either
  // way, as eval reports it.
  bool strict_lengths = false;
  // RoPE scaling for this probe (poslab probe --rope-scaling); unset: the run's eval.rope_scaling, as eval.
  std::optional<RopeScalingConfig> rope_scaling;
};

// An experiment's "probes": {"passkey": {"lengths": [..], "depths": [..], "trials": N, "haystack": .., "threshold": ..,
// "seed": .., "digits": .., "template": .., "controls": true}}: every key optional. Throws ConfigError naming
// `where`.KEY for an unknown task or key, a wrong type or a value out of range.
ProbeOptions probe_options_from_json(const std::string& task, const nlohmann::json& j, const std::string& where);
// The options' values checked; `name(key)` says how the user spelled a key ("--trials", "probes.passkey.trials").
void check_probe_options(const ProbeOptions& o, const std::function<std::string(const std::string&)>& name);
nlohmann::json probe_options_to_json(const ProbeOptions& o);

// The lengths a probe of run config `c` takes when none are given: passkey, the run's evaluation lengths;
// mqar on a run trained on mqar, 1, 2, 4 and 8 times its training length in tokens.
std::vector<int> default_probe_lengths(const ProbeOptions& o, const Config& c);

// The passkey's key digits and template: the probe's own where given, else the run's data.probes.passkey
// (the template's "auto" resolved against the run's block_size).
struct PasskeyTemplate;
struct ResolvedPasskey {
  int digits;
  const PasskeyTemplate& tmpl;
};
ResolvedPasskey resolved_passkey(const ProbeOptions& o, const Config& c);

// What a probe file (RUN/probe-TASK.json) of run config `c` records otherwise than options `o` would write it
// ("trials 40, not 50"), each unset option taken as the run's default; "" when it is that probe. Its rope
// scaling is compared with the run's eval.rope_scaling (or the scaling it trained with).
std::string probe_file_differs(const nlohmann::json& file, const ProbeOptions& o, const Config& c);

}  // namespace poslab
