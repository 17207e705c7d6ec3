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
#include "probe/options.h"
#include "probe/passkey.h"
#include "util/runtime.h"

namespace poslab {



// Scores of documents that share one length: the prompt is ids[0, key_start), the key follows.
struct KeyScores {
  int64_t trials = 0, exact = 0;
  double digit_hits = 0;     // greedy digits equal to the key's, summed over trials
  double logprob_sum = 0;    // teacher-forced log-probability of the whole key, summed over trials
};
// Greedy decoding of `digits` tokens after each prompt (KV cache where the encoding allows one and the
// cache fits memory; full recomputes otherwise) and the key's teacher-forced log-probability.
// docs: (N, L+1) token ids with the answer in the last `digits` columns.
// allow_cache false: always recompute (the tests' reference for the cached path).
// on_chunk(done, N): called after each chunk of documents is scored (progress on long documents).
KeyScores score_keys(GPT& model, const torch::Tensor& docs, int64_t digits, const Runtime& runtime, bool allow_cache = true,
                     const std::function<void(int64_t done, int64_t total)>& on_chunk = {});

// Why a run of config `c` cannot take the passkey's text haystack ("" when it can): it cuts held-out text of a
// character-level text run at sentence boundaries. Checked by probe and, before any cell trains, by compare.
std::string text_haystack_refusal(const Config& c);

// Refuses (ConfigError, "--task passkey: ...") a vocabulary that cannot write the probe's documents: the ten
// digits, the template's words, the noise filler. Checked by probe and, for character runs, by compare before
// any cell trains.
void check_passkey_vocabulary(const CharTokenizer& tok, const Config& c, const ProbeOptions& o);

// The passkey probe's cells on a loaded model (probe_model's "results" with the template and its settings).
nlohmann::json passkey_probe(GPT& model, const CharTokenizer& tok, const Config& c, const ProbeOptions& o,
                             const Runtime& runtime);

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
