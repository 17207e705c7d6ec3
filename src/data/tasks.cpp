// Synthetic task generators. Each returns text plus the index where the scored answer starts.
#include "data/tasks.h"

#include <algorithm>

#include "config/config.h"

namespace poslab {

const std::string kTaskAlphabet = "_|.?+#0123456789abcdefghijklmnopqrstuvwxyz()[]";
const std::vector<std::string> kTaskNames = {"copy",   "reverse",  "sort", "addition",
                                             "associative_recall", "parity", "counting", "dyck"};

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

Example make_example(const std::string& task, int n, int symbols, Rng& rng) {
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

int task_tokens(const std::string& task, int n) {
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
  return task;
}

}  // namespace poslab
