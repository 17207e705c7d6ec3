// Evaluation on text: windows of each length over the validation split's last targets, by the windows
// and the sliding protocols, with the key-token statistics, a chunk of targets at a time (docs/outputs.md).
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "data/corpus.h"
#include "eval/evaluator.h"
#include "eval/key_tokens.h"

namespace poslab {

// One result row per o.lengths entry, in order (an "n/a" row where a length cannot be evaluated), without
// the length, tokens and rope_scaling keys, which evaluate() adds.
std::vector<nlohmann::json> evaluate_text(GPT& model, const TextCorpus& corpus, const EvalOptions& o, const Runtime& rt,
                                          const KeyTokenOptions& key);

}  // namespace poslab
