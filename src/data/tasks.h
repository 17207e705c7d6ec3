// Synthetic tasks: deterministic example generators with a separator and a scored answer.
// Every task writes into one fixed alphabet, so models trained on different tasks share a vocabulary.
#pragma once
#include <string>
#include <vector>

#include "config/config.h"
#include "data/rng.h"

namespace poslab {

// '_' pads, '|' separates question from answer, '.' ends an example.
extern const std::string kTaskAlphabet;
extern const std::vector<std::string> kTaskNames;

// A scored target the text does not show next: the model reading character `pos` must predict `value`.
struct Target {
  int pos;
  char value;
};

struct Example {
  std::string text;  // e.g. "abc|abc."
  int score_from;    // characters at index >= score_from are scored as targets
  // mqar: when non-empty, these alone are scored (score_from is not used): the answer to a query key
  // is its value, predicted at the key's own position (Zoology's labels), and never written after it.
  std::vector<Target> targets = {};
};

// One example with `n` items (digits for addition, pairs for recall, dyck and mqar, bits for parity).
// `mqar` holds the mqar task's options; other tasks ignore it.
Example make_example(const std::string& task, int n, int symbols, Rng& rng, const MqarConfig& mqar = {});
// Characters in an example of `n` items (the longest, for addition).
int64_t task_tokens(const std::string& task, int n, const MqarConfig& mqar = {});

// Multi-query associative recall (Zoology, Arora et al. 2023): `pairs` distinct key letters (from the
// first `symbols`) each with a digit, "k1v1k2v2...|", then a query region of `slots` characters: the
// queried keys at distinct slots drawn from the gap distribution, '#' elsewhere, then '.'.
Example make_mqar_example(int pairs, int slots, int symbols, const MqarConfig& mqar, Rng& rng);
// Keys queried in an example of `pairs` pairs: data.mqar.queries (0 = all), at most the pairs.
int mqar_queries(int pairs, const MqarConfig& mqar);
// Tasks scored as plain language modelling have no single right answer (dyck).
bool task_has_answer(const std::string& task);
std::string describe_task(const std::string& task);

}  // namespace poslab
