// Synthetic tasks and batching: deterministic, correct answers, and loss masks on answers only.
#include <gtest/gtest.h>

#include <algorithm>

#include "data/corpus.h"
#include "data/tasks.h"
#include "data/tokenizer.h"
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
