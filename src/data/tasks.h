// Synthetic tasks: deterministic example generators with a separator and a scored answer.
// Every task writes into one fixed alphabet, so models trained on different tasks share a vocabulary.
#pragma once
#include <string>
#include <vector>

#include "data/rng.h"

namespace poslab {

// '_' pads, '|' separates question from answer, '.' ends an example.
extern const std::string kTaskAlphabet;
extern const std::vector<std::string> kTaskNames;

struct Example {
  std::string text;  // e.g. "abc|abc."
  int score_from;    // characters at index >= score_from are scored as targets
};

// One example with `n` items (digits for addition, pairs for recall and dyck, bits for parity).
Example make_example(const std::string& task, int n, int symbols, Rng& rng);
// Characters in an example of `n` items (the longest, for addition).
int task_tokens(const std::string& task, int n);
// Tasks scored as plain language modelling have no single right answer (dyck).
bool task_has_answer(const std::string& task);
std::string describe_task(const std::string& task);

}  // namespace poslab
