// Synthetic tasks and batching: deterministic, correct answers, and loss masks on answers only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "data/corpus.h"
#include "data/tasks.h"
#include "data/tokenizer.h"
#include "tokenize/utf8_split.h"
#include "test_util.h"

using namespace poslab;

static std::pair<std::string, std::string> split_qa(const Example& e) {
  auto bar = e.text.find('|');
  return {e.text.substr(0, bar), e.text.substr(bar + 1, e.text.size() - bar - 2)};
}

TEST(Tasks, SameSeedSameExamplesAcrossCalls) {
  for (const auto& task : kTaskNames) {
    Rng a(42), b(42), c(43);
    auto ea = make_example(task, 12, 16, a), eb = make_example(task, 12, 16, b), ec = make_example(task, 12, 16, c);
    EXPECT_EQ(ea.text, eb.text) << task;
    EXPECT_NE(ea.text, ec.text) << task;
  }
}

TEST(Tasks, PinnedExampleGuardsCrossMachineDeterminism) {
  // SplitMix64 and our own uniform draw: these strings must never change between builds.
  Rng rng(1);
  EXPECT_EQ(Rng(7).next(), Rng(7).next());
  auto e = make_example("copy", 6, 16, rng);
  Rng again(1);
  EXPECT_EQ(make_example("copy", 6, 16, again).text, e.text);
  EXPECT_EQ(e.text.size(), 14u);
}

TEST(Tasks, AnswersAreWhatTheNamesSay) {
  Rng rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 1 + trial % 20;
    auto [q, a] = split_qa(make_example("copy", n, 16, rng));
    EXPECT_EQ(a, q);
    auto [rq, ra] = split_qa(make_example("reverse", n, 16, rng));
    EXPECT_EQ(ra, std::string(rq.rbegin(), rq.rend()));
    auto [sq, sa] = split_qa(make_example("sort", n, 16, rng));
    EXPECT_TRUE(std::is_sorted(sa.begin(), sa.end()));
    std::sort(sq.begin(), sq.end());
    EXPECT_EQ(sa, sq);
    auto [aq, aa] = split_qa(make_example("addition", std::min(n, 9), 16, rng));
    auto plus = aq.find('+');
    EXPECT_EQ(std::stoll(aa), std::stoll(aq.substr(0, plus)) + std::stoll(aq.substr(plus + 1)));
    auto [pq, pa] = split_qa(make_example("parity", n, 16, rng));
    EXPECT_EQ(pa, std::to_string(std::count(pq.begin(), pq.end(), '1') % 2));
    auto [cq, ca] = split_qa(make_example("counting", n, 16, rng));
    ASSERT_EQ(static_cast<int>(ca.size()), n);
    for (int i = 0; i < n; ++i) EXPECT_EQ(ca[i] - '0', (cq[0] - '0' + i) % 10);
    auto [kq, ka] = split_qa(make_example("associative_recall", n, 16, rng));
    char key = kq.back();
    char last = 0;
    for (size_t i = 0; i + 1 < kq.size() - 2; i += 2)
      if (kq[i] == key) last = kq[i + 1];
    EXPECT_EQ(ka, std::string(1, last));
    auto dyck = make_example("dyck", n, 16, rng).text;
    std::string stack;
    for (char ch : dyck.substr(0, dyck.size() - 1)) {
      if (ch == '(' || ch == '[') stack.push_back(ch);
      else {
        ASSERT_FALSE(stack.empty());
        EXPECT_EQ(stack.back(), ch == ')' ? '(' : '[');
        stack.pop_back();
      }
    }
    EXPECT_TRUE(stack.empty());
    EXPECT_EQ(static_cast<int>(dyck.size()), task_tokens("dyck", n));
  }
}

TEST(Tasks, TokenCountsMatchGenerators) {
  Rng rng(3);
  for (const auto& task : kTaskNames)
    for (int n : {1, 5, 16}) {
      auto e = make_example(task, n, 16, rng);
      EXPECT_LE(static_cast<int>(e.text.size()), task_tokens(task, n)) << task;
      if (task != "addition") EXPECT_EQ(static_cast<int>(e.text.size()), task_tokens(task, n)) << task;
    }
}

TEST(Tasks, MqarAnswersAreTheQueriedKeysValuesAtTheirPositions) {
  Rng rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    MqarConfig m;
    m.queries = trial % 3 == 0 ? 3 : 0;
    m.gaps = trial % 2 ? "uniform" : "power";
    const int K = 1 + trial % 16, S = K + trial % 40;
    auto e = make_mqar_example(K, S, 16, m, rng);
    const int Q = m.queries == 0 ? K : std::min(3, K);
    ASSERT_EQ(static_cast<int>(e.text.size()), 2 * K + 1 + S + 1);
    EXPECT_EQ(e.text[2 * K], '|');
    EXPECT_EQ(e.text.back(), '.');
    std::string keys;
    for (int i = 0; i < K; ++i) {
      keys.push_back(e.text[2 * i]);
      EXPECT_TRUE(e.text[2 * i] >= 'a' && e.text[2 * i] < 'a' + 16);
      EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(e.text[2 * i + 1])));
    }
    std::string sorted = keys;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end()) << "repeated key in " << e.text;
    ASSERT_EQ(static_cast<int>(e.targets.size()), Q);
    int queried = 0;
    for (int p = 2 * K + 1; p < 2 * K + 1 + S; ++p) {
      if (e.text[p] == '#') continue;
      ++queried;
      auto t = std::find_if(e.targets.begin(), e.targets.end(), [&](const Target& x) { return x.pos == p; });
      ASSERT_NE(t, e.targets.end()) << "a query without a target in " << e.text;
      EXPECT_EQ(t->value, e.text[keys.find(e.text[p]) * 2 + 1]) << e.text;
    }
    EXPECT_EQ(queried, Q) << e.text;
  }
}

TEST(Tasks, MqarSlotsFollowZoologysPowerLaw) {
  // One query among 8 slots: slot i with probability (i+1)^(a-1) / sum, or 1/8 for uniform gaps.
  for (const double a : {0.01, 0.5}) {
    MqarConfig m;
    m.power_a = a;
    Rng rng(5);
    std::vector<int> count(8, 0);
    const int draws = 40000;
    for (int i = 0; i < draws; ++i) count[make_mqar_example(1, 8, 4, m, rng).targets[0].pos - 3]++;
    double z = 0;
    for (int i = 1; i <= 8; ++i) z += std::pow(i, a - 1);
    for (int i = 0; i < 8; ++i) EXPECT_NEAR(count[i] / double(draws), std::pow(i + 1, a - 1) / z, 0.01) << "a " << a << " slot " << i;
  }
  MqarConfig u;
  u.gaps = "uniform";
  Rng rng(6);
  std::vector<int> count(8, 0);
  for (int i = 0; i < 40000; ++i) count[make_mqar_example(1, 8, 4, u, rng).targets[0].pos - 3]++;
  for (int c : count) EXPECT_NEAR(c / 40000.0, 1.0 / 8, 0.01);
}

TEST(Batching, MqarScoresTheAnswersAlone) {
  DataConfig d;
  d.task = "mqar";
  d.min_len = 2;
  d.max_len = 6;
  TaskCorpus corpus(d);
  const auto& tok = corpus.tokenizer();
  Rng rng(9);
  auto batch = corpus.batch(Split::Train, 16, rng);
  for (int64_t b = 0; b < 16; ++b) {
    std::vector<int64_t> ids(batch.x[b].data_ptr<int64_t>(), batch.x[b].data_ptr<int64_t>() + batch.x.size(1));
    const std::string x = tok.decode(ids);
    const size_t bar = x.find('|');
    int scored = 0;
    for (int64_t t = 0; t < batch.y.size(1); ++t) {
      const int64_t y = batch.y[b][t].item<int64_t>();
      const char c = x[t];
      const bool query = t > static_cast<int64_t>(bar) && c >= 'a' && c <= 'z';
      EXPECT_EQ(y >= 0, query) << "position " << t << " of " << x;
      if (y < 0) continue;
      ++scored;
      EXPECT_EQ(tok.decode({y}), std::string(1, x[x.find(c) + 1])) << x;  // the key's value from the pairs
    }
    EXPECT_EQ(scored, static_cast<int>(bar) / 2) << x;  // every pair asked (queries 0)
  }
}

TEST(Batching, MaskScoresOnlyAnswersAndNeverPadding) {
  DataConfig d;
  d.task = "copy";
  d.min_len = 1;
  d.max_len = 10;
  TaskCorpus corpus(d);
  Rng rng(5);
  auto batch = corpus.batch(Split::Train, 16, rng);
  const auto& tok = corpus.tokenizer();
  for (int64_t b = 0; b < 16; ++b) {
    std::vector<int64_t> ids(batch.x[b].data_ptr<int64_t>(), batch.x[b].data_ptr<int64_t>() + batch.x.size(1));
    std::string text = tok.decode(ids);
    auto bar = text.find('|');
    auto q = text.substr(0, bar);
    std::string scored;
    for (int64_t t = 0; t < batch.y.size(1); ++t) {
      int64_t y = batch.y[b][t].item<int64_t>();
      if (y < 0) continue;
      EXPECT_GE(t, static_cast<int64_t>(bar)) << "a question token is scored";
      scored += tok.decode({y});
    }
    EXPECT_EQ(scored, q + ".");  // the answer (a copy) and the end mark, nothing else
  }
}

TEST(Batching, EvalLengthIsExact) {
  DataConfig d;
  d.task = "reverse";
  TaskCorpus corpus(d);
  Rng rng(1);
  auto batch = corpus.batch_at_length(40, 4, rng);
  EXPECT_EQ(batch.x.size(1), task_tokens("reverse", 40) - 1);
  EXPECT_EQ(batch.y.ge(0).sum(1).eq(41).all().item<bool>(), true);
}

TEST(Tokenizer, RoundTripAndErrors) {
  auto tok = CharTokenizer::from_text("héllo wörld", "t");
  EXPECT_EQ(tok.decode(tok.encode("wöll")), "wöll");
  EXPECT_THROW(tok.encode("xyz"), ConfigError);
  EXPECT_THROW(CharTokenizer::from_text(std::string("ab\xff" "cd"), "bad.txt"), ConfigError);
  try {
    split_utf8(std::string("ab\xc3"), "f.txt");
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("invalid UTF-8 at byte 2"), std::string::npos);
  }
  // What the UTF-8 definition (RFC 3629) excludes though the bytes are shaped like a sequence: an overlong
  // '/', a UTF-16 surrogate half (CESU-8, Python's surrogatepass), a code point past U+10FFFF.
  for (const std::string bad : {std::string("a\xc0\xaf"), std::string("a\xe0\x80\xaf"), std::string("a\xed\xa0\x80"),
                                std::string("a\xed\xbf\xbf"), std::string("a\xf4\x90\x80\x80")}) {
    try {
      split_utf8(bad, "f.txt");
      ADD_FAILURE() << "accepted " << ::testing::PrintToString(bad);
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("invalid UTF-8 at byte 1"), std::string::npos) << e.what();
    }
  }
  // Their neighbours are text: the last code points before and after the surrogates, and U+10FFFF.
  EXPECT_EQ(split_utf8("\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf\xf0\x9f\x98\x80", "f.txt").size(), 4u);
}

// poslab-tokenize's streamed check refuses what the char-level reader does, within a buffer and across
// a buffer's end (a sequence carried into the next buffer), and passes the same neighbours.
TEST(Tokenizer, StreamedUtf8CheckAgreesWithTheCharReader) {
  const std::vector<std::string> bad = {"a\xc0\xaf", "a\xe0\x80\xaf", "a\xed\xa0\x80", "a\xed\xbf\xbf", "a\xf4\x90\x80\x80",
                                        "a\xff", "a\xe2\x82"};
  for (const auto& s : bad) {
    size_t carry = 0;
    EXPECT_EQ(tok::invalid_utf8_at(s.data(), s.size(), 100, /*more=*/false, &carry), 101) << ::testing::PrintToString(s);
    EXPECT_THROW(split_utf8(s, "f.txt"), ConfigError) << ::testing::PrintToString(s);
    // Cut after the lead byte: carried while more follows, then refused with the rest.
    if (s.size() > 2) {
      EXPECT_EQ(tok::invalid_utf8_at(s.data(), 2, 0, /*more=*/true, &carry), -1) << ::testing::PrintToString(s);
      EXPECT_EQ(carry, 1u);
      EXPECT_EQ(tok::invalid_utf8_at(s.data() + 1, s.size() - 1, 1, /*more=*/false, &carry), 1) << ::testing::PrintToString(s);
    }
  }
  const std::string good = "\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf\xf0\x9f\x98\x80" "e\xcc\x81";  // split: \x80e would be one escape
  size_t carry = 0;
  EXPECT_EQ(tok::invalid_utf8_at(good.data(), good.size(), 0, /*more=*/false, &carry), -1);
  EXPECT_EQ(split_utf8(good, "f.txt").size(), 6u);
}

// nanoGPT's itos may hold words, not characters (a word-level prepare.py): a prompt is matched to the
// longest entry it continues with, so `poslab sample` can encode it.
TEST(Tokenizer, SymbolsOfSeveralCharactersAreMatchedLongestFirst) {
  CharTokenizer tok({"the ", "th", "t", "cat ", "\n", "é"});
  EXPECT_EQ(tok.encode("the cat \nthét"), (std::vector<int64_t>{0, 3, 4, 1, 5, 2}));
  EXPECT_EQ(tok.decode(tok.encode("the cat \nthét")), "the cat \nthét");
  try {
    tok.encode("the dog", "--prompt");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--prompt: the text from byte 4 ('d...') starts with none of the run's 6 vocabulary entries"),
              std::string::npos) << e.what();
  }
}

TEST(TextCorpus, SplitsNinetyTenAndRefusesShortFiles) {
  poslab::testing::TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the quick brown fox. ";
  DataConfig d;
  d.kind = "text";
  d.path = dir.file("t.txt", text);
  TextCorpus corpus(d, 16);
  EXPECT_EQ(corpus.split_tokens(Split::Val), static_cast<int64_t>(text.size() * 0.1));
  EXPECT_EQ(corpus.split_tokens(Split::Train) + corpus.split_tokens(Split::Val), static_cast<int64_t>(text.size()));
  Rng rng(1);
  auto b = corpus.batch(Split::Train, 4, rng);
  EXPECT_TRUE(torch::equal(b.x.slice(1, 1), b.y.slice(1, 0, 15)));  // y is x shifted by one
  d.path = dir.file("short.txt", "tiny");
  EXPECT_THROW(TextCorpus(d, 16), ConfigError);
  d.path = dir.file("empty.txt", "");
  EXPECT_THROW(TextCorpus(d, 16), ConfigError);
}

// Passkey documents scored on the answer alone ("answer"): only a suffix of each document's targets from the
// key on is scored, every scored target is the next input, and that holds at every batch size. At one row a
// window's inputs and targets were two views of one buffer, and writing the document's inputs overwrote its
// masked targets: every target was scored.
TEST(TextCorpus, PasskeyAnswerLossMasksAtEveryBatchSize) {
  poslab::testing::TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "The grass is green. The sky is blue. Here we go. What is the key? 0123456789. ";
  DataConfig d;
  d.kind = "text";
  d.path = dir.file("t.txt", text);
  d.probes.passkey.fraction = 1.0;
  d.probes.passkey.digits = 2;
  d.probes.passkey.loss = "answer";
  const int64_t T = 64;
  TextCorpus corpus(d, T);
  for (int batch : {1, 2, 3}) {
    Rng rng(7);
    const auto b = corpus.batch(Split::Train, batch, rng);
    ASSERT_EQ(b.x.sizes(), b.y.sizes());
    EXPECT_NE(b.x.data_ptr<int64_t>() + 1, b.y.data_ptr<int64_t>()) << "inputs and targets share a buffer";
    const auto x = b.x.accessor<int64_t, 2>();
    const auto y = b.y.accessor<int64_t, 2>();
    for (int r = 0; r < batch; ++r) {
      int64_t first = -1, scored = 0;
      for (int64_t t = 0; t < T; ++t) {
        if (y[r][t] < 0) {
          EXPECT_EQ(first, -1) << "batch " << batch << " row " << r << ": a masked target after a scored one at " << t;
          continue;
        }
        if (first < 0) first = t;
        ++scored;
        if (t + 1 < T) EXPECT_EQ(y[r][t], x[r][t + 1]) << "batch " << batch << " row " << r << " position " << t;
      }
      // The key's digits and what follows them in the document, never the filler before it.
      EXPECT_GE(scored, 2) << "batch " << batch << " row " << r;
      EXPECT_LT(scored, T / 2) << "batch " << batch << " row " << r << ": " << scored << " of " << T << " targets scored";
    }
  }
}
