// Retrieval probes: does a trained model use context past its training length? `passkey` hides a key
// in filler at a depth and asks for it at the end; `mqar` scores a run trained on the mqar task on
// longer sequences. Both decode greedily with the KV cache, report exact match per (length, depth)
// with Wilson intervals, and the effective length. Writes RUN/probe-<task>.json.
#pragma once
#include <nlohmann/json.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/tokenizer.h"
#include "model/gpt.h"
#include "probe/passkey.h"
#include "util/runtime.h"

namespace poslab {

extern const std::vector<std::string> kProbeTasks;  // passkey, mqar

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

// Scores of documents that share one length: the prompt is ids[0, key_start), the key follows.
struct KeyScores {
  int64_t trials = 0, exact = 0;
  double digit_hits = 0;     // greedy digits equal to the key's, summed over trials
  double logprob_sum = 0;    // teacher-forced log-probability of the whole key, summed over trials
};
// Greedy decoding of `digits` tokens after each prompt (KV cache where the encoding allows one and the
// prefill fits memory; full recomputes otherwise) and the key's teacher-forced log-probability.
// docs: (N, L+1) token ids with the answer in the last `digits` columns.
// allow_cache false: always recompute (the tests' reference for the cached path).
KeyScores score_keys(GPT& model, const torch::Tensor& docs, int64_t digits, const Runtime& runtime, bool allow_cache = true);

// Why a run of config `c` cannot take the passkey's text haystack ("" when it can): it cuts held-out text of a
// character-level text run at sentence boundaries. Checked by probe and, before any cell trains, by compare.
std::string text_haystack_refusal(const Config& c);

// Refuses (ConfigError, "--task passkey: ...") a vocabulary that cannot write the probe's documents: the ten
// digits, the template's words, the noise filler. Checked by probe and, for character runs, by compare before
// any cell trains.
void check_passkey_vocabulary(const CharTokenizer& tok, const Config& c, const ProbeOptions& o);

// Why the model's encoding cannot take L tokens ("" when it can): a table's size, or any other limit of the
// kind (check_length: xPos's scales past ~128 scale_base tokens). Both probes mark such a length n/a.
std::string encoding_length_limit(GPT& model, int64_t L);

// The effective length (docs/probes.md) of a probe's result rows: exact match pooled per length over the
// rows that are not controls; an n/a length counts as a failure, one too short for the template not at all.
int effective_length_of(const nlohmann::json& results, double threshold);

// Runs the probe on a loaded model. The JSON is the file's content (see docs/probes.md).
nlohmann::json probe_model(GPT& model, const CharTokenizer& tok, const Config& config, const ProbeOptions& options,
                           const Runtime& runtime);
// Loads RUN, checks the options (ConfigError naming the flag), probes, writes RUN/probe-<task>.json.
nlohmann::json probe_run(const std::string& dir, ProbeOptions options);
// The console table of a probe JSON.
std::string format_probe_table(const nlohmann::json& probe);

}  // namespace poslab
