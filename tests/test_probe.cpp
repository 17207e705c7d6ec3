// Retrieval probes: the passkey template against the reference's strings, where the needle lands,
// Wilson intervals against an independent formulation, the effective-length rule on hand-made tables,
// and the cached greedy scorer against a full recompute and against teacher forcing; the mqar answer scorer.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/key_tokens.h"
#include "probe/mqar.h"
#include "probe/passkey.h"
#include "probe/probe.h"
#include "probe/stats.h"
#include "test_models.h"

using namespace poslab;

// Copied by hand from epfml/landmark-attention llama/run_test.py, generate_prompt().
static const char* kRefTask =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you about "
    "the important information there.";
static const char* kRefGarbage = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
static const char* kRefQuestion = "What is the pass key? The pass key is";

static CharTokenizer probe_tokenizer() {
  return CharTokenizer::from_text(std::string(kRefTask) + kRefGarbage + kRefQuestion + "The pass key is . Remember it. "
                                  "The key is What is the key?0123456789\n !",
                                  "test");
}

static std::string text_of(const CharTokenizer& tok, const std::vector<int64_t>& ids, size_t from = 0, size_t to = std::string::npos) {
  to = std::min(to, ids.size());
  return tok.decode(std::vector<int64_t>(ids.begin() + from, ids.begin() + to));
}

static size_t occurrences(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t i = hay.find(needle); i != std::string::npos; i = hay.find(needle, i + 1)) ++n;
  return n;
}

TEST(Passkey, ReferenceTemplateIsWordForWord) {
  EXPECT_EQ(kReferenceTemplate.task, kRefTask);
  EXPECT_EQ(kNoiseFiller, kRefGarbage);
  EXPECT_EQ(kReferenceTemplate.question, kRefQuestion);
  // f"The pass key is {pass_key}. Remember it. {pass_key} is the pass key." with pass_key = 12345
  auto tok = probe_tokenizer();
  Rng rng(1);
  auto hay = noise_haystack(tok, 2000);
  auto doc = make_passkey_doc(tok, kReferenceTemplate, "12345", 700, 0.5, hay, 0);
  const std::string text = tok.decode(doc.ids);
  EXPECT_NE(text.find("\nThe pass key is 12345. Remember it. 12345 is the pass key.\n"), std::string::npos);
  EXPECT_EQ(text.rfind(std::string(kRefTask) + "\n", 0), 0u) << "the task line comes first";
  EXPECT_EQ(text.substr(text.size() - 5 - std::string(kRefQuestion).size() - 2), "\n" + std::string(kRefQuestion) + " 12345");
}

TEST(Passkey, NoiseStreamIsTheReferenceJoinedBySpaces) {
  auto tok = probe_tokenizer();
  auto hay = noise_haystack(tok, 500);
  std::string joined;
  while (joined.size() < hay.ids.size()) joined += (joined.empty() ? "" : " ") + std::string(kRefGarbage);
  EXPECT_EQ(tok.decode(hay.ids), joined.substr(0, hay.ids.size() - 1) + " ");
  for (auto s : hay.starts) {
    const std::string rest = tok.decode(std::vector<int64_t>(hay.ids.begin() + s, hay.ids.begin() + std::min<size_t>(s + 3, hay.ids.size())));
    EXPECT_TRUE(rest.rfind("The", 0) == 0 || rest.rfind("Her", 0) == 0) << rest;
  }
}

// Every length and depth: exactly L+1 tokens, the answer at the end, the key in the needle twice and once
// as the answer, and the needle within one sentence of the requested depth.
TEST(Passkey, NeedleLandsWithinASentenceOfTheDepthAndTheKeyAppearsTwice) {
  auto tok = probe_tokenizer();
  for (const auto* t : {&kReferenceTemplate, &kCompactTemplate}) {
    for (int L : {300, 517, 1024}) {
      Rng rng(L);
      auto hay = noise_haystack(tok, L + 1);
      for (double depth : {0.0, 0.1, 0.25, 0.5, 0.77, 1.0}) {
        const std::string key = random_key(5, rng);
        auto doc = make_passkey_doc(tok, *t, key, L, depth, hay, 0);
        ASSERT_EQ(static_cast<int>(doc.ids.size()), L + 1);
        EXPECT_EQ(text_of(tok, doc.ids, doc.key_start), key);
        const std::string prompt = text_of(tok, doc.ids, 0, doc.key_start);
        EXPECT_EQ(occurrences(prompt, key), t == &kReferenceTemplate ? 2u : 1u) << prompt;
        EXPECT_EQ(occurrences(tok.decode(doc.ids), key), t == &kReferenceTemplate ? 3u : 2u);
        // Depth in filler tokens: filler = everything but the fixed parts.
        const int64_t filler = L + 1 - passkey_fixed_tokens(tok, *t, 5);
        const int64_t task = t->task.empty() ? 0 : static_cast<int64_t>(t->task.size() + t->sep.size());
        const int64_t before = doc.needle_start - task - static_cast<int64_t>(t->sep.size());
        EXPECT_NEAR(static_cast<double>(before) / filler, doc.depth, 1e-12);
        const double longest_sentence = 22;  // "There and back again. "
        EXPECT_LE(std::abs(before - depth * filler), longest_sentence) << t->name << " L=" << L << " depth=" << depth;
        if (depth == 1.0) EXPECT_EQ(before, filler) << "depth 1: the needle next to the question";
        if (depth == 0.0) EXPECT_EQ(before, 0) << "depth 0: the needle first";
      }
    }
  }
}

TEST(Passkey, WithoutTheNeedleTheKeyIsOnlyTheAnswer) {
  auto tok = probe_tokenizer();
  auto hay = noise_haystack(tok, 600);
  auto doc = make_passkey_doc(tok, kReferenceTemplate, "48151", 512, 0.5, hay, 0, /*needle=*/false);
  ASSERT_EQ(doc.ids.size(), 513u);
  EXPECT_EQ(occurrences(tok.decode(doc.ids), "48151"), 1u);
  EXPECT_EQ(doc.needle_start, -1);
  EXPECT_EQ(occurrences(tok.decode(doc.ids), "pass key is"), 1u) << "only the question";
}

TEST(Passkey, TooShortALengthIsRefusedNotTruncated) {
  auto tok = probe_tokenizer();
  auto hay = noise_haystack(tok, 100);
  EXPECT_THROW(make_passkey_doc(tok, kReferenceTemplate, "12345", 100, 0.5, hay, 0), ConfigError);
  EXPECT_NO_THROW(make_passkey_doc(tok, kCompactTemplate, "12", 64, 0.5, hay, 0));
}

TEST(Passkey, TextHaystackStartsAtSentences) {
  auto tok = probe_tokenizer();
  auto ids = tok.encode("The sky is blue. The sun is yellow.\nHere we go! There and back again? The grass is green.", "t");
  auto hay = text_haystack(tok, ids);
  std::vector<std::string> firsts;
  for (auto s : hay.starts) firsts.push_back(text_of(tok, hay.ids, s, s + 4));
  EXPECT_EQ(firsts, (std::vector<std::string>{"The ", "The ", "Here", "Ther", "The "}));
  Rng rng(5);
  for (int i = 0; i < 20; ++i) EXPECT_LE(draw_sentence_start(hay, 40, rng, "t") + 40, static_cast<int64_t>(ids.size()));
  EXPECT_THROW(draw_sentence_start(hay, 1000, rng, "t"), ConfigError);
}

TEST(Passkey, KeysHaveTheirDigitsAndUniformDigits) {
  Rng rng(11);
  std::vector<int> counts(10, 0);
  for (int i = 0; i < 20000; ++i) {
    auto k = random_key(5, rng);
    ASSERT_EQ(k.size(), 5u);
    EXPECT_NE(k[0], '0');
    for (size_t j = 1; j < 5; ++j) counts[k[j] - '0']++;
  }
  for (int c : counts) EXPECT_NEAR(c / 80000.0, 0.1, 0.01);
}

// Wilson (1927): the interval's ends are the p where |phat - p| = z sqrt(p (1 - p) / n), found here by
// bisection on that equation, not by the closed form the code uses.
static double solve_wilson_end(int64_t k, int64_t n, double z, bool upper) {
  const double phat = static_cast<double>(k) / n;
  auto f = [&](double p) { return (phat - p) * (phat - p) - z * z * p * (1 - p) / n; };  // 0 at the ends
  double lo = upper ? phat : 0.0, hi = upper ? 1.0 : phat;
  if (upper && k == n) return 1.0;
  if (!upper && k == 0) return 0.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    // Inside the interval f < 0; outside f > 0.
    if ((f(mid) < 0) == upper) lo = mid; else hi = mid;
  }
  return (lo + hi) / 2;
}

TEST(ProbeStats, WilsonEqualsTheSolvedEquation) {
  for (int64_t n : {1, 5, 50, 200, 1000})
    for (int64_t k : {int64_t{0}, int64_t{1}, n / 3, n / 2, n - 1, n}) {
      if (k < 0 || k > n) continue;
      auto [lo, hi] = wilson_interval(k, n);
      EXPECT_NEAR(lo, solve_wilson_end(k, n, 1.959963984540054, false), 1e-9) << k << "/" << n;
      EXPECT_NEAR(hi, solve_wilson_end(k, n, 1.959963984540054, true), 1e-9) << k << "/" << n;
    }
  // At no success the lower end is 0 and at all successes the upper end is 1, exactly: the equation's root
  // there is p itself (written to files, 1e-17 would read as "some retrieval").
  for (int64_t n = 1; n <= 1000; ++n) {
    ASSERT_EQ(wilson_interval(0, n).first, 0.0) << "0/" << n;
    ASSERT_EQ(wilson_interval(n, n).second, 1.0) << n << "/" << n;
  }
  // A published value: 45 of 50 gives about [0.7864, 0.9565] (Wilson, 95%).
  auto [lo, hi] = wilson_interval(45, 50);
  EXPECT_NEAR(lo, 0.7864, 5e-4);
  EXPECT_NEAR(hi, 0.9565, 5e-4);
}

TEST(ProbeStats, EffectiveLengthRule) {
  // 50 of 50: lower bound 0.929; 48 of 50: 0.865; 45 of 50: 0.786.
  EXPECT_EQ(effective_length({{64, 50, 50}, {128, 50, 50}, {256, 48, 50}, {512, 10, 50}}, 0.85), 256);
  EXPECT_EQ(effective_length({{64, 50, 50}, {128, 45, 50}, {256, 50, 50}}, 0.85), 64) << "a dip stops it";
  EXPECT_EQ(effective_length({{64, 40, 50}, {128, 50, 50}}, 0.85), 0) << "failing at the shortest";
  EXPECT_EQ(effective_length({{512, 50, 50}, {64, 50, 50}, {128, 50, 50}}, 0.85), 512) << "order of the table";
  EXPECT_EQ(effective_length({{64, 48, 50}}, 0.9), 0) << "the threshold is on the lower bound, not the rate";
  EXPECT_EQ(effective_length({{64, 5, 5}}, 0.85), 0) << "5 of 5 is not enough evidence for 0.85 (bound 0.566)";
}

// From a probe's rows: controls do not count, a length past a learned table fails, and a length too short for
// the template (a compare grid lets it through as n/a) was not tested, so it neither stops nor counts.
TEST(ProbeStats, EffectiveLengthFromRows) {
  auto row = [](int L, const nlohmann::json& control, const std::string& status, double exact) {
    nlohmann::json r = {{"length", L}, {"depth", 0.0}, {"control", control}, {"status", status}, {"trials", 50}, {"exact", exact}};
    if (status != "ok") r["trials"] = 0, r["exact"] = nullptr;
    return r;
  };
  const std::string too_short = "n/a: the compact template with 2-digit keys needs more than 46 tokens";
  const nlohmann::json ok = {row(32, nullptr, too_short, 0), row(64, nullptr, "ok", 1.0), row(128, nullptr, "ok", 1.0),
                             row(128, "adjacent", "ok", 0.0)};
  EXPECT_EQ(effective_length_of(ok, 0.85), 128);
  const nlohmann::json past = {row(64, nullptr, "ok", 1.0), row(128, nullptr, "n/a: the encoding represents 64 positions", 0),
                               row(256, nullptr, "ok", 1.0)};
  EXPECT_EQ(effective_length_of(past, 0.85), 64) << "past a learned table is a failure";
}

static GPT probe_model_of(const std::string& kind, int64_t vocab) {
  ModelConfig m = poslab::testing::tiny(kind);
  m.vocab_size = vocab;
  m.block_size = 64;
  torch::manual_seed(7);
  GPT model(m);
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.5);
  model->eval();
  return model;
}

// Long documents are scored a few at a time, each chunk reported as it finishes (the probe's progress lines).
TEST(ProbeScoring, ReportsEachChunkOfLongDocuments) {
  auto model = probe_model_of("alibi", 12);
  torch::manual_seed(5);
  // A document's scores (2 heads, a block of 128 queries against 6144 keys) and activations pass half a
  // chunk's 32 MiB: one document a chunk.
  auto docs = torch::randint(0, 12, {3, 6145}, torch::kLong);
  std::vector<std::pair<int64_t, int64_t>> calls;
  Runtime rt;
  auto s = score_keys(model, docs, 2, rt, /*allow_cache=*/true, [&](int64_t done, int64_t total) { calls.emplace_back(done, total); });
  EXPECT_EQ(s.trials, 3);
  const std::vector<std::pair<int64_t, int64_t>> expected = {{1, 3}, {2, 3}, {3, 3}};
  EXPECT_EQ(calls, expected);
}

// The cached greedy scorer equals a full recompute; exact match equals "every teacher-forced argmax is
// the key" (greedy reproduces the key iff each digit is the argmax given the true prefix).
TEST(ProbeScoring, CachedEqualsRecomputedAndTeacherForcing) {
  for (const std::string kind : {"rope", "alibi", "sinusoidal", "none"}) {
    auto model = probe_model_of(kind, 12);
    torch::manual_seed(3);
    auto docs = torch::randint(0, 12, {9, 41}, torch::kLong);
    // Make some keys the model's own greedy continuation, so exact matches occur.
    for (int64_t r = 0; r < 4; ++r) {
      torch::NoGradGuard g;
      for (int64_t i = 41 - 3; i < 41; ++i) docs[r][i] = model->forward(docs[r].slice(0, 0, i).unsqueeze(0)).select(1, -1).argmax(-1).item<int64_t>();
    }
    Runtime rt;
    auto a = score_keys(model, docs, 3, rt, /*allow_cache=*/true);
    auto b = score_keys(model, docs, 3, rt, /*allow_cache=*/false);
    model->query_block = 8;  // the prefill in query blocks, as a long document's runs
    auto c = score_keys(model, docs, 3, rt, /*allow_cache=*/true);
    model->query_block = 0;
    EXPECT_EQ(c.exact, a.exact) << kind;
    EXPECT_DOUBLE_EQ(c.digit_hits, a.digit_hits) << kind;
    EXPECT_NEAR(c.logprob_sum, a.logprob_sum, 1e-3) << kind;
    EXPECT_EQ(a.trials, 9);
    EXPECT_EQ(a.exact, b.exact) << kind;
    EXPECT_DOUBLE_EQ(a.digit_hits, b.digit_hits) << kind;
    EXPECT_NEAR(a.logprob_sum, b.logprob_sum, 1e-3) << kind;
    EXPECT_GE(a.exact, 4) << kind;
    // Independent: teacher forcing by one forward pass, per row.
    torch::NoGradGuard g;
    auto logits = model->forward(docs.slice(1, 0, 40));                     // (9, 40, V)
    auto logp = torch::log_softmax(logits.slice(1, 37, 40), -1);            // (9, 3, V) predicting 38..40
    auto key = docs.slice(1, 38, 41);                                       // (9, 3)
    const double lp = logp.gather(-1, key.unsqueeze(-1)).sum().item<double>();
    EXPECT_NEAR(a.logprob_sum, lp, 1e-3) << kind;
    const int64_t all_argmax = logp.argmax(-1).eq(key).all(1).sum().item<int64_t>();
    EXPECT_EQ(a.exact, all_argmax) << kind;
  }
}

// The mqar scorer: per example, exact = every answer is the argmax, accuracy = the fraction that is,
// logprob = the mean log-probability of the answers; checked against per-position loops over one
// forward pass, with rows made right on purpose so that exact matches occur.
TEST(ProbeScoring, MqarAnswersScoredAtTheirPositions) {
  auto model = probe_model_of("alibi", 12);
  torch::manual_seed(4);
  const int64_t N = 6, T = 20;
  auto x = torch::randint(0, 12, {N, T}, torch::kLong);
  auto y = torch::full({N, T}, -1, torch::kLong);
  torch::Tensor logits;
  {
    torch::NoGradGuard g;
    logits = model->forward(x);  // (N, T, V)
  }
  auto argmax = logits.argmax(-1);  // (N, T)
  for (int64_t r = 0; r < N; ++r)
    for (int64_t t : {int64_t{5}, int64_t{9}, 14 + r % 3}) y[r][t] = r < 3 ? argmax[r][t].item<int64_t>() : (argmax[r][t].item<int64_t>() + (t == 9 ? 1 : 0)) % 12;
  Runtime rt;
  const AnswerScores s = score_answers(model, Batch{x, y}, rt);
  auto logp = torch::log_softmax(logits, -1);
  int64_t exact = 0;
  double accuracy = 0, logprob = 0;
  for (int64_t r = 0; r < N; ++r) {
    int right = 0, answers = 0;
    double lp = 0;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t target = y[r][t].item<int64_t>();
      if (target < 0) continue;
      ++answers;
      right += argmax[r][t].item<int64_t>() == target;
      lp += logp[r][t][target].item<double>();
    }
    exact += right == answers;
    accuracy += static_cast<double>(right) / answers;
    logprob += lp / answers;
  }
  EXPECT_EQ(s.trials, N);
  EXPECT_EQ(s.exact, 3);  // rows 0-2 are the model's own argmax; rows 3-5 miss at position 9
  EXPECT_EQ(s.exact, exact);
  EXPECT_NEAR(s.accuracy_sum, accuracy, 1e-9);
  EXPECT_NEAR(s.accuracy_sum, 3 + 3 * 2.0 / 3, 1e-9);
  EXPECT_NEAR(s.logprob_sum, logprob, 1e-4);
}

// key_token_stats on hand-made vectors: NaN targets are skipped, the margin is strict, the fraction
// counts targets scored in both, and the losses are null when no target qualifies.
TEST(KeyTokenStats, HandMadeVectors) {
  const double nan = std::nan("");
  KeyTokenOptions o;
  o.short_context = 16;
  o.margin = 1.0;
  //                  key   not(=margin) key   skipped skipped not
  std::vector<double> full = {0.5, 1.0, 0.2, nan, 2.0, 3.0};
  std::vector<double> shrt = {2.0, 2.0, 1.7, 1.0, nan, 3.5};
  auto k = key_token_stats(full, shrt, o);
  EXPECT_EQ(k["short_context"].get<int64_t>(), 16);
  EXPECT_EQ(k["count"].get<int64_t>(), 2);
  EXPECT_DOUBLE_EQ(k["fraction"].get<double>(), 2.0 / 4.0);
  EXPECT_DOUBLE_EQ(k["loss"].get<double>(), (0.5 + 0.2) / 2);
  EXPECT_DOUBLE_EQ(k["short_loss"].get<double>(), (2.0 + 1.7) / 2);
  o.margin = 10;
  auto none = key_token_stats(full, shrt, o);
  EXPECT_EQ(none["count"].get<int64_t>(), 0);
  EXPECT_DOUBLE_EQ(none["fraction"].get<double>(), 0.0);
  EXPECT_TRUE(none["loss"].is_null());
  EXPECT_TRUE(none["short_loss"].is_null());
}

// A probe option that must be an int is refused in one ConfigError naming its key when it is a float or an
// integer past int's range; before, such a value was converted (a float past int's range: undefined).
TEST(ProbeOptions, NumbersThatAreNotIntsAreRefusedWithTheirKey) {
  const std::vector<nlohmann::json> bad = {1.5, 1.1e37, -1.1e37, 4294967328LL, -4294967328LL, 2147483648LL};
  for (const std::string key : {"trials", "seed", "digits", "lengths"}) {
    for (const auto& value : bad) {
      const auto j = key == "lengths" ? nlohmann::json{{key, {32, value}}} : nlohmann::json{{key, value}};
      try {
        probe_options_from_json("passkey", j, "probes.passkey");
        ADD_FAILURE() << key << " = " << value.dump() << " was accepted";
      } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find("probes.passkey." + key), std::string::npos) << e.what();
      }
    }
  }
  // The largest int is read as itself (a length of 2^31-1 passes the type check; 64 is read back).
  auto o = probe_options_from_json("passkey", {{"lengths", {64, 2147483647LL}}, {"seed", -2147483648LL}}, "p");
  EXPECT_EQ(o.lengths, (std::vector<int>{64, 2147483647}));
  EXPECT_EQ(o.seed, -2147483647 - 1);
}

// The mqar probe's options: an unknown key is answered with mqar's own keys (not the passkey's), a passkey
// option given to it is refused by name, and what an experiment saves of it reads back as the same options.
TEST(ProbeOptions, MqarOffersItsOwnKeysAndRoundTrips) {
  auto message = [](const std::string& task, const nlohmann::json& j) {
    try {
      probe_options_from_json(task, j, "probes." + task);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string unknown = message("mqar", {{"trails", 5}});
  EXPECT_NE(unknown.find("probes.mqar.trails: unknown key (allowed: lengths, trials, threshold, seed)"), std::string::npos) << unknown;
  EXPECT_EQ(unknown.find("depths"), std::string::npos) << unknown;
  EXPECT_NE(message("passkey", {{"trails", 5}}).find("depths"), std::string::npos);
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"depths", {0.5}}, {"haystack", "text"}, {"digits", 3}, {"template", "compact"}, {"controls", false}})
    EXPECT_NE(message("mqar", {{key, value}}).find("probes.mqar." + key + " applies to the passkey probe only"), std::string::npos)
        << key << ": " << message("mqar", {{key, value}});
  const auto mqar = probe_options_from_json("mqar", {{"lengths", {16, 32}}, {"trials", 7}, {"threshold", 0.5}, {"seed", 4}}, "p");
  const auto saved = probe_options_to_json(mqar);
  EXPECT_FALSE(saved.contains("haystack") || saved.contains("controls") || saved.contains("depths")) << saved.dump();
  const auto back = probe_options_from_json("mqar", saved, "p");
  EXPECT_EQ(back.lengths, mqar.lengths);
  EXPECT_EQ(back.trials, 7);
  EXPECT_EQ(back.threshold, 0.5);
  EXPECT_EQ(back.seed, 4);
  // What an earlier version saved (haystack and controls at their defaults) still reads.
  EXPECT_EQ(message("mqar", {{"trials", 3}, {"haystack", "noise"}, {"controls", true}}), "accepted");
  const auto passkey = probe_options_to_json(probe_options_from_json("passkey", {{"controls", false}}, "p"));
  EXPECT_EQ(passkey["controls"], false);
}

// Whether a probe file on disk is the probe an experiment's options ask for: the file as the probe writes
// it (written here by hand) matches; any one setting changed does not, naming the setting; a damaged file
// is a difference, not a crash (const json's operator[] on a missing key is undefined).
TEST(ProbeOptions, ProbeFileDiffersNamesEachSetting) {
  Config c;
  c.data.kind = "text";
  ProbeOptions o = probe_options_from_json(
      "passkey", {{"lengths", {64, 128}}, {"depths", {0, 0.5}}, {"digits", 3}, {"template", "reference"}}, "p");
  auto row = [](int L, nlohmann::json depth, nlohmann::json control) {
    return nlohmann::json{{"length", L}, {"depth", depth}, {"control", control}, {"status", "ok"}};
  };
  nlohmann::json file = {{"task", "passkey"}, {"trials", 50}, {"seed", 1}, {"threshold", 0.85}, {"rope_scaling", "none"},
                         {"digits", 3}, {"haystack", "noise"}, {"template", "reference"}, {"results", nlohmann::json::array()}};
  for (int L : {64, 128})
    for (const auto& r : {row(L, 0, nullptr), row(L, 0.5, nullptr), row(L, 1.0, "adjacent"), row(L, nullptr, "no_needle")})
      file["results"].push_back(r);
  EXPECT_EQ(probe_file_differs(file, o, c), "");
  auto with = [&](const std::string& key, const nlohmann::json& value) {
    nlohmann::json f = file;
    f[key] = value;
    return probe_file_differs(f, o, c);
  };
  EXPECT_EQ(with("trials", 40), "trials 40, not 50");
  EXPECT_EQ(with("seed", 2), "seed 2, not 1");
  EXPECT_EQ(with("threshold", 0.5), "threshold 0.5, not 0.85");
  EXPECT_EQ(with("digits", 5), "digits 5, not 3");
  EXPECT_EQ(with("haystack", "text"), "haystack text, not noise");
  EXPECT_EQ(with("template", "compact"), "template compact, not reference");
  EXPECT_EQ(with("rope_scaling", {{"kind", "yarn"}, {"factor", 4.0}, {"original_length", 64}}), "RoPE scaling yarn x4.0, not none");
  nlohmann::json fewer = file;
  fewer["results"].erase(fewer["results"].begin(), fewer["results"].begin() + 4);  // length 64's rows
  EXPECT_EQ(probe_file_differs(fewer, o, c), "lengths [128], not [64,128]");
  nlohmann::json depths = file;
  for (auto& r : depths["results"])
    if (r["depth"] == 0.5) r["depth"] = 0.25;
  EXPECT_EQ(probe_file_differs(depths, o, c), "depths [0,0.25], not [0,0.5]");
  nlohmann::json bare = file;
  bare["results"] = nlohmann::json::array();
  for (int L : {64, 128})
    for (const auto& r : {row(L, 0, nullptr), row(L, 0.5, nullptr)}) bare["results"].push_back(r);
  EXPECT_EQ(probe_file_differs(bare, o, c), "no control rows");
  // The run's eval.rope_scaling is what the probe runs with: a file without it differs, one with it matches.
  Config scaled = c;
  scaled.eval.rope_scaling = {"yarn", 4.0, 0};
  EXPECT_EQ(probe_file_differs(file, o, scaled), "RoPE scaling none, not yarn x4.0");
  nlohmann::json yarn = file;
  yarn["rope_scaling"] = {{"kind", "yarn"}, {"factor", 4.0}, {"original_length", 64}};
  EXPECT_EQ(probe_file_differs(yarn, o, scaled), "");
  // Damaged files: no results, a row that is not an object, rows without their keys.
  nlohmann::json none = file;
  none.erase("results");
  EXPECT_EQ(probe_file_differs(none, o, c), "no results");
  nlohmann::json odd = file;
  odd["results"].push_back(3);
  EXPECT_EQ(probe_file_differs(odd, o, c), "a result that is not an object");
  nlohmann::json keyless = file;
  for (auto& r : keyless["results"]) r.erase("control"), r.erase("depth");
  EXPECT_EQ(probe_file_differs(keyless, o, c), "depths [], not [0,0.5]");
  EXPECT_NE(probe_file_differs(nlohmann::json::array(), o, c), "");
}
