// The mqar probe: a run trained on multi-query associative recall, scored past its training length
// along two axes: distance (the run's pairs, the query region stretched to L tokens) and load (pairs
// scaled with L, the region spread the same way). Each answer is one token, so teacher-forced argmax
// at the query positions is greedy decoding.
#pragma once
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "data/corpus.h"
#include "model/gpt.h"
#include "util/runtime.h"

namespace poslab {

struct ProbeOptions;

// Input tokens of a training example at data.max_len pairs: the run's training length in tokens.
int mqar_train_tokens(const Config& c);
// ConfigError naming the flag: a run not trained on mqar, a length too short for the run's pairs.
void check_mqar_probe(const Config& c, const ProbeOptions& o);

// Scores of examples whose targets are answers (y >= 0 at the query positions only).
struct AnswerScores {
  int64_t trials = 0, exact = 0;
  double accuracy_sum = 0;  // per example: the fraction of its answers right, summed
  double logprob_sum = 0;   // per example: the mean log-probability of its answers, summed
};
AnswerScores score_answers(GPT& model, const Batch& batch, const Runtime& rt);

// The probe's cells ({"results": [...], with "axis", "pairs" and "queries" per row}, and the options).
nlohmann::json mqar_probe(GPT& model, const Config& c, const ProbeOptions& o, const Runtime& rt);

}  // namespace poslab
