// Synthetic task generators. Each returns text plus the index where the scored answer starts.
#include "data/tasks.h"

#include <algorithm>
#include <cmath>

#include "config/config.h"

namespace poslab {

const std::string kTaskAlphabet = "_|.?+#0123456789abcdefghijklmnopqrstuvwxyz()[]";
const std::vector<std::string> kTaskNames = {"copy",   "reverse",  "sort", "addition",
                                             "associative_recall", "parity", "counting", "dyck", "mqar"};

static char letter(int symbols, Rng& rng) { return static_cast<char>('a' + rng.below(symbols)); }
static char digit(Rng& rng) { return static_cast<char>('0' + rng.below(10)); }

static std::string add_decimal(const std::string& a, const std::string& b) {
  std::string out;
  int carry = 0;
  for (int i = static_cast<int>(a.size()) - 1, j = static_cast<int>(b.size()) - 1; i >= 0 || j >= 0 || carry;
       --i, --j) {
    int s = carry + (i >= 0 ? a[i] - '0' : 0) + (j >= 0 ? b[j] - '0' : 0);
    out.push_back(static_cast<char>('0' + s % 10));
    carry = s / 10;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

static Example question_answer(const std::string& question, const std::string& answer) {
  return {question + "|" + answer + ".", static_cast<int>(question.size()) + 1};
}

int mqar_queries(int pairs, const MqarConfig& m) { return m.queries == 0 ? pairs : std::min(m.queries, pairs); }

// A uniform double in [0, 1) from the top 53 bits, the same on every machine.
static double uniform01(Rng& rng) { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; }

Example make_mqar_example(int pairs, int slots, int symbols, const MqarConfig& m, Rng& rng) {
  const int queries = mqar_queries(pairs, m);
  if (pairs < 1 || pairs > symbols || slots < queries)
    throw ConfigError("mqar: " + std::to_string(pairs) + " pairs need 1.." + std::to_string(symbols) +
                      " key letters and at least " + std::to_string(queries) + " query slots, got " + std::to_string(slots));
  // Distinct keys: the first `pairs` letters of a partial Fisher-Yates shuffle of the key alphabet.
  std::string keys;
  for (int i = 0; i < symbols; ++i) keys.push_back(static_cast<char>('a' + i));
  for (int i = 0; i < pairs; ++i) std::swap(keys[i], keys[i + rng.below(symbols - i)]);
  keys.resize(pairs);
  std::string values;
  for (int i = 0; i < pairs; ++i) values.push_back(digit(rng));
  std::string text;
  for (int i = 0; i < pairs; ++i) text += std::string{keys[i], values[i]};
  text.push_back('|');
  const int region = static_cast<int>(text.size());
  // Which pairs are asked, in query order: a partial shuffle of the pair indices.
  std::vector<int> asked(pairs);
  for (int i = 0; i < pairs; ++i) asked[i] = i;
  for (int i = 0; i < queries; ++i) std::swap(asked[i], asked[i + rng.below(pairs - i)]);
  // Slots without replacement, slot i weighted (i+1)^(a-1) as in Zoology (numpy's choice with p and
  // replace=False: each draw renormalises over the slots still free); uniform: all weights 1.
  std::vector<double> weight(slots, 1.0);
  if (m.gaps == "power")
    for (int i = 0; i < slots; ++i) weight[i] = std::pow(static_cast<double>(i + 1), m.power_a - 1.0);
  std::string query(slots, '#');
  Example e{"", 0};
  for (int q = 0; q < queries; ++q) {
    double total = 0;
    for (int i = 0; i < slots; ++i) total += weight[i];
    double r = uniform01(rng) * total;
    int slot = -1;
    for (int i = 0; i < slots; ++i) {
      if (weight[i] == 0) continue;
      slot = i;  // the last free slot takes any rounding remainder
      if (r < weight[i]) break;
      r -= weight[i];
    }
    weight[slot] = 0;
    query[slot] = keys[asked[q]];
    e.targets.push_back({region + slot, values[asked[q]]});
  }
  std::sort(e.targets.begin(), e.targets.end(), [](const Target& a, const Target& b) { return a.pos < b.pos; });
  e.text = text + query + ".";
  e.score_from = static_cast<int>(e.text.size());  // nothing by position: the targets are the answers
  return e;
}

Example make_example(const std::string& task, int n, int symbols, Rng& rng, const MqarConfig& mqar) {
  if (task == "mqar") return make_mqar_example(n, mqar.space * n, symbols, mqar, rng);
  if (task == "copy" || task == "reverse" || task == "sort") {
    std::string s;
    for (int i = 0; i < n; ++i) s.push_back(letter(symbols, rng));
    std::string answer = s;
    if (task == "reverse") std::reverse(answer.begin(), answer.end());
    if (task == "sort") std::sort(answer.begin(), answer.end());
    return question_answer(s, answer);
  }
  if (task == "addition") {
    auto number = [&] {
      std::string s;
      for (int i = 0; i < n; ++i) s.push_back(i == 0 && n > 1 ? static_cast<char>('1' + rng.below(9)) : digit(rng));
      return s;
    };
    std::string a = number(), b = number();
    return question_answer(a + "+" + b, add_decimal(a, b));
  }
  if (task == "associative_recall") {
    // Keys may repeat; the query asks for the value of the key's last occurrence.
    std::string pairs;
    for (int i = 0; i < n; ++i) {
      pairs.push_back(letter(symbols, rng));
      pairs.push_back(digit(rng));
    }
    char key = pairs[2 * rng.below(n)];
    char value = 0;
    for (int i = 0; i < n; ++i)
      if (pairs[2 * i] == key) value = pairs[2 * i + 1];
    return question_answer(pairs + "?" + std::string(1, key), std::string(1, value));
  }
  if (task == "parity") {
    std::string bits;
    int ones = 0;
    for (int i = 0; i < n; ++i) {
      bits.push_back(static_cast<char>('0' + rng.below(2)));
      ones += bits.back() == '1';
    }
    return question_answer(bits, ones % 2 ? "1" : "0");
  }
  if (task == "counting") {
    // "7###|789." : count n steps from the start digit, modulo 10.
    int start = static_cast<int>(rng.below(10));
    std::string answer;
    for (int i = 0; i < n; ++i) answer.push_back(static_cast<char>('0' + (start + i) % 10));
    return question_answer(std::string(1, static_cast<char>('0' + start)) + std::string(n, '#'), answer);
  }
  if (task == "dyck") {
    // A uniformly random walk over open/close moves with two bracket types, scored as LM.
    std::string s, stack;
    int opens_left = n;
    while (opens_left > 0 || !stack.empty()) {
      bool open = opens_left > 0 && (stack.empty() || rng.below(2) == 0);
      if (open) {
        char c = rng.below(2) ? '(' : '[';
        s.push_back(c);
        stack.push_back(c);
        --opens_left;
      } else {
        s.push_back(stack.back() == '(' ? ')' : ']');
        stack.pop_back();
      }
    }
    return {s + ".", 1};
  }
  throw ConfigError("data.task: unknown task '" + task + "'");
}

int64_t task_tokens(const std::string& task, int n_items, const MqarConfig& mqar) {
  const int64_t n = n_items;  // in 64 bits: 2n + 1 wraps an int from 2^30 items
  if (task == "mqar") return 2 * n + 1 + mqar.space * n + 1;
  if (task == "copy" || task == "reverse" || task == "sort") return 2 * n + 2;
  if (task == "addition") return (2 * n + 1) + 1 + (n + 1) + 1;
  if (task == "associative_recall") return 2 * n + 5;
  if (task == "parity") return n + 3;
  if (task == "counting") return 2 * n + 3;
  if (task == "dyck") return 2 * n + 1;
  throw ConfigError("data.task: unknown task '" + task + "'");
}

bool task_has_answer(const std::string& task) { return task != "dyck"; }

std::string describe_task(const std::string& task) {
  if (task == "copy") return "repeat the letters after '|'";
  if (task == "reverse") return "write the letters in reverse order";
  if (task == "sort") return "write the letters in sorted order";
  if (task == "addition") return "add two n-digit numbers";
  if (task == "associative_recall") return "key-value pairs, then '?key': answer the key's last value";
  if (task == "parity") return "parity of n bits";
  if (task == "counting") return "count n steps modulo 10 from the start digit";
  if (task == "dyck") return "balanced strings of () and [], scored as language modelling";
  if (task == "mqar") return "distinct key-value pairs, then a region of queried keys: answer each key's value at its position";
  return task;
}

}  // namespace poslab
