// Evaluation: reproduces the validation loss at the training length, per-position losses average
// to the reported loss, n/a for lengths an encoding cannot represent, and batch splitting is exact.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "eval/evaluator.h"
#include "train/run_dir.h"
#include "train/trainer.h"
#include "test_util.h"

using namespace poslab;
using poslab::testing::TempDir;

static Config tiny_text(const std::string& kind, const std::string& path) {
  Config c;
  c.data.kind = "text";
  c.data.path = path;
  c.model.n_layer = 1;
  c.model.n_head = 2;
  c.model.n_embd = 32;
  c.model.block_size = 32;
  c.model.pos_encoding.kind = kind;
  c.train.max_iters = 40;
  c.train.batch_size = 16;
  c.train.learning_rate = 3e-3;
  c.train.eval_interval = 40;
  c.train.eval_iters = 20;
  c.train.precision = "fp32";
  c.train.threads = 1;
  return c;
}

static std::string corpus_file(const TempDir&) {
  return std::string(POSLAB_SOURCE_DIR) + "/data/text/licenses.txt";
}

TEST(Eval, ReproducesValidationLossAtTrainingLength) {
  TempDir dir;
  auto result = train_new(tiny_text("rope", corpus_file(dir)), dir.sub("run"));
  EvalOptions o;
  o.lengths = {32};
  o.batches = 40;
  o.batch_size = 16;
  auto eval = evaluate_run(dir.sub("run"), o);
  const double val = result.summary["final_val_loss"].get<double>();
  const double loss = eval["results"][0]["loss"].get<double>();
  // Random validation windows vs non-overlapping ones over the same split: same quantity.
  EXPECT_NEAR(loss, val, 0.05 * val) << "eval " << loss << " vs training val " << val;
  EXPECT_EQ(eval["results"][0]["status"], "ok");
  EXPECT_TRUE(std::filesystem::exists(RunPaths{dir.sub("run")}.eval()));
}

TEST(Eval, PositionLossesAverageToReportedLoss) {
  TempDir dir;
  Config c = tiny_text("alibi", corpus_file(dir));
  c.train.max_iters = 5;
  train_new(c, dir.sub("run"));
  EvalOptions o;
  o.lengths = {32, 96};
  o.batch_size = 8;
  o.tokens = 20 * 96;  // a multiple of both lengths: every window is whole, every position scored equally often
  auto eval = evaluate_run(dir.sub("run"), o);
  for (const auto& r : eval["results"]) {
    const auto& curve = r["position_loss"];
    ASSERT_EQ(static_cast<int>(curve.size()), r["length"].get<int>());
    double sum = 0;
    for (const auto& v : curve) sum += v.get<double>();  // every position is scored equally often in windows
    EXPECT_NEAR(sum / curve.size(), r["loss"].get<double>(), 1e-6);
    EXPECT_TRUE(r.contains("sliding"));
    EXPECT_EQ(r["protocol"], "windows");
  }
}

// A run of `c` trained 3 steps, evaluated at `lengths` (one batch each).
static nlohmann::json briefly_trained_eval(const TempDir& dir, Config c, const std::vector<int>& lengths) {
  c.train.max_iters = 3;
  train_new(c, dir.sub("run"));
  EvalOptions o;
  o.lengths = lengths;
  o.batches = 1;
  o.batch_size = 2;
  return evaluate_run(dir.sub("run"), o);
}

TEST(Eval, LearnedTableReportsNotApplicableAndOtherLengthsRun) {
  TempDir dir;
  auto eval = briefly_trained_eval(dir, tiny_text("learned", corpus_file(dir)), {16, 64, 32});
  EXPECT_EQ(eval["results"][0]["status"], "ok");
  EXPECT_EQ(eval["results"][1]["status"], "n/a: learned table has 32 positions");
  EXPECT_TRUE(eval["results"][1]["loss"].is_null());
  EXPECT_EQ(eval["results"][2]["status"], "ok");
}

// xPos past the length its scales hold (about 128 scale_base tokens): n/a, not a nan loss reported ok.
TEST(Eval, XposPastItsScalesRangeIsNotApplicable) {
  TempDir dir;
  Config c = tiny_text("xpos", corpus_file(dir));
  c.model.pos_encoding.scale_base = 1;  // the bound at 126 tokens
  auto eval = briefly_trained_eval(dir, c, {16, 126, 256});
  EXPECT_EQ(eval["results"][0]["status"], "ok");
  EXPECT_EQ(eval["results"][1]["status"], "ok");
  EXPECT_TRUE(std::isfinite(eval["results"][1]["loss"].get<double>()));
  EXPECT_EQ(eval["results"][2]["status"], "n/a: xpos scales overflow float past 126 tokens (about 128 x scale_base 1)");
  EXPECT_TRUE(eval["results"][2]["loss"].is_null());
}

TEST(Eval, SplittingBatchesForMemoryChangesNothing) {
  TempDir dir;
  Config c = tiny_text("rope", corpus_file(dir));
  c.train.max_iters = 3;
  train_new(c, dir.sub("run"));
  auto run = load_run(dir.sub("run"));
  auto corpus = make_corpus(run.config, run.tokenizer);
  Runtime rt = make_runtime(run.config);
  EvalOptions big{{128}, 1, 8, 0, /*tokens=*/1000};
  EvalOptions small = big;
  small.memory_budget_bytes = 1;  // one row at a time
  auto a = evaluate(run.model, *corpus, run.config, big, rt), b = evaluate(run.model, *corpus, run.config, small, rt);
  EXPECT_NEAR(a["results"][0]["loss"].get<double>(), b["results"][0]["loss"].get<double>(), 1e-6);
}

TEST(Eval, RandomizedEvaluationOfALengthDependsOnNothingElse) {
  // randomize.eval: a length's loss is the same evaluated alone or beside other lengths, at any batch size,
  // with or without the key-token pass (each window's positions are drawn from its own tokens).
  TempDir dir;
  Config c = tiny_text("rope", corpus_file(dir));
  c.train.max_iters = 3;
  c.model.pos_encoding.randomize.max_position = 256;
  c.model.pos_encoding.randomize.eval = true;
  train_new(c, dir.sub("run"));
  auto run = load_run(dir.sub("run"));
  auto corpus = make_corpus(run.config, run.tokenizer);
  Runtime rt = make_runtime(run.config);
  EvalOptions alone{{64}, 1, 3, 0, /*tokens=*/1500};
  EvalOptions beside{{32, 64, 128}, 1, 8, 0, /*tokens=*/1500};
  Config keyless = run.config;
  keyless.eval.key_short = -1;
  const double a = evaluate(run.model, *corpus, keyless, alone, rt)["results"][0]["loss"].get<double>();
  const nlohmann::json both = evaluate(run.model, *corpus, run.config, beside, rt);
  ASSERT_FALSE(both["results"][1]["key_tokens"].is_null());  // the key-token pass ran before it
  EXPECT_NEAR(a, both["results"][1]["loss"].get<double>(), 1e-12);  // sums grouped by batch: last bits only
  // And the draw is a real one: the same windows at positions 0..63 score otherwise.
  Config fixed = keyless;
  run.model->pos->set_randomize(256, /*eval=*/false);
  EXPECT_NE(a, evaluate(run.model, *corpus, fixed, alone, rt)["results"][0]["loss"].get<double>());
}

// A one-layer task model trained for two steps in fp32: enough to evaluate.
static Config tiny_task(const std::string& task, int max_len, int block_size) {
  Config c;
  c.data.task = task;
  c.data.max_len = max_len;
  c.model.n_layer = 1;
  c.model.n_embd = 32;
  c.model.block_size = block_size;
  c.train.max_iters = 2;
  c.train.precision = "fp32";
  return c;
}

TEST(Eval, TaskExactMatchAndAnswerOnlyScoring) {
  TempDir dir;
  Config c = tiny_task("copy", /*max_len=*/4, /*block_size=*/16);
  train_new(c, dir.sub("run"));
  EvalOptions o;
  o.lengths = {4, 8};
  o.batches = 1;
  o.batch_size = 8;
  auto eval = evaluate_run(dir.sub("run"), o);
  EXPECT_EQ(eval["length_unit"], "items");
  EXPECT_EQ(eval["results"][0]["scored_tokens"].get<int>(), 8 * 5);  // 4 answer tokens + end mark, per example
  EXPECT_EQ(eval["results"][1]["status"], "n/a: learned table has 16 positions");
  EXPECT_TRUE(eval["results"][0]["exact_match"].is_number());
}

// Evaluates `run` with `o` while capturing spdlog's lines: (the lines, the first length's loss).
static std::pair<std::string, double> evaluate_logged(const std::string& run, const EvalOptions& o) {
  std::ostringstream out;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(out)));
  const auto eval = evaluate_run(run, o);
  spdlog::set_default_logger(previous);
  return {out.str(), eval["results"][0]["loss"].get<double>()};
}

// A long task length reports its batches as it goes (here every batch: progress_seconds 0), and only then.
TEST(Eval, TaskEvalReportsProgressBetweenBatches) {
  TempDir dir;
  Config c = tiny_task("copy", /*max_len=*/4, /*block_size=*/16);
  train_new(c, dir.sub("run"));
  auto logged = [&](double progress_seconds) {
    EvalOptions o;
    o.lengths = {4};
    o.batches = 3;
    o.batch_size = 2;
    o.progress_seconds = progress_seconds;
    return evaluate_logged(dir.sub("run"), o);
  };
  const auto [every, loss_every] = logged(0);
  EXPECT_NE(every.find("eval length 4: batch 1 of 3 done"), std::string::npos) << every;
  EXPECT_NE(every.find("eval length 4: batch 2 of 3 done"), std::string::npos) << every;
  EXPECT_EQ(every.find("batch 3 of 3"), std::string::npos) << "the length's own line follows the last batch";
  const auto [none, loss_none] = logged(1e9);
  EXPECT_EQ(none.find(" done in "), std::string::npos) << none;
  EXPECT_EQ(loss_every, loss_none);
}

// Text: the windows of a length, a batch at a time, reported the same way.
TEST(Eval, TextEvalReportsProgressBetweenBatchesOfWindows) {
  TempDir dir;
  Config c = tiny_text("alibi", corpus_file(dir));
  c.train.max_iters = 2;
  train_new(c, dir.sub("run"));
  auto logged = [&](double progress_seconds) {
    EvalOptions o;
    o.lengths = {32};
    o.batch_size = 64;
    o.tokens = 32 * 64 * 3;  // the last targets: three batches of 64 windows (and a few more at the split's edge)
    o.progress_seconds = progress_seconds;
    return evaluate_logged(dir.sub("run"), o);
  };
  const auto [every, loss_every] = logged(0);
  EXPECT_NE(every.find("eval length 32: 64 of "), std::string::npos) << every;
  EXPECT_NE(every.find("eval length 32: 128 of "), std::string::npos) << every;
  const auto [none, loss_none] = logged(1e9);
  EXPECT_EQ(none.find(" windows scored"), std::string::npos) << none;
  EXPECT_EQ(loss_every, loss_none);
}

// position_loss covers positions 0 .. tokens-1 on tasks as on text (null where nothing was scored), also where
// the examples drawn are shorter than the length's longest (addition without a carry).
TEST(Eval, TaskPositionLossCoversEveryPositionOfTheLength) {
  TempDir dir;
  Config c = tiny_task("addition", /*max_len=*/6, /*block_size=*/32);
  train_new(c, dir.sub("run"));
  for (int seed_batches : {1, 2}) {
    EvalOptions o;
    o.lengths = {3, 6};
    o.batches = seed_batches;
    o.batch_size = 1;
    auto eval = evaluate_run(dir.sub("run"), o);
    for (const auto& r : eval["results"]) {
      ASSERT_EQ(r["status"], "ok") << r.dump();
      EXPECT_EQ(static_cast<int64_t>(r["position_loss"].size()), r["tokens"].get<int64_t>()) << r["length"];
    }
  }
}

// The windows every protocol uses, checked against the definition by brute force: each target in
// (first, last] scored exactly once, by a window of `length` tokens inside the split that ends on a
// scored target's chunk; the windows protocol's windows score whole windows except at the split's start.
TEST(Eval, TextWindowPlanScoresEveryTargetOnce) {
  for (int64_t last : {99, 100, 128}) {
    for (int64_t first : {int64_t{0}, int64_t{37}, last - 5}) {
      for (int64_t length : {1, 7, 16, 32, 99}) {
        if (length > last) continue;
        for (int64_t step : {int64_t{1}, length / 2 > 0 ? length / 2 : 1, length}) {
          std::vector<int> seen(last + 1, 0);
          std::set<int64_t> starts;
          for (const auto& w : plan_text_windows(first, last, length, step)) {
            ASSERT_GE(w.start, 0);
            // One window per start: an evaluation runs each start once and scores what its plan asks there.
            ASSERT_TRUE(starts.insert(w.start).second) << "two windows start at " << w.start << " (first " << first
                                                        << " last " << last << " length " << length << " step " << step << ")";
            ASSERT_LE(w.start + length, last);  // inputs start .. start+length-1, targets up to start+length <= last
            ASSERT_GE(w.lo, 0);
            ASSERT_LE(w.hi, length);
            ASSERT_LT(w.lo, w.hi);
            for (int64_t p = w.lo; p < w.hi; ++p) ++seen[w.start + p + 1];  // position p predicts token start+p+1
            // Sliding: a window away from the split's start gives each target >= length - step tokens before it.
            if (w.start > 0) EXPECT_GE(w.lo, length - step);
          }
          for (int64_t t = 0; t <= last; ++t)
            ASSERT_EQ(seen[t], t > first ? 1 : 0) << "target " << t << " first " << first << " last " << last
                                                    << " length " << length << " step " << step;
        }
      }
    }
  }
  // Windows protocol over 3 whole windows: exactly those three, each scored whole.
  const auto w = plan_text_windows(100 - 3 * 16, 100, 16, 16);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0], (TextWindow{52, 0, 16}));
  EXPECT_EQ(w[2], (TextWindow{84, 0, 16}));
}

// The plan a chunk of targets at a time is the whole plan: every target of every chunk scored once, by the
// window the whole plan gives it. The whole plan here is its definition written out again: windows from
// the end backwards, each ending where the one after it began scoring.
TEST(Eval, TextWindowPlanInChunksIsTheWholePlan) {
  for (int64_t last : {50, 99, 128}) {
    for (int64_t first : {int64_t{0}, int64_t{21}, last - 5}) {
      for (int64_t length : {1, 7, 16, 40}) {
        for (int64_t step : {int64_t{1}, std::max<int64_t>(1, length / 2), length, std::max<int64_t>(1, length - 3)}) {
          std::map<int64_t, int64_t> window_of;  // target -> start of the window that scores it
          for (int64_t end = last; end > first;) {
            int64_t lo = std::max(first, end - step), start = end - length;
            if (start <= 0) start = 0, lo = first;  // the window at token 0 scores every target left
            for (int64_t t = lo + 1; t <= end; ++t) window_of[t] = start;
            end = lo;
          }
          for (int64_t chunk : {int64_t{1}, int64_t{3}, int64_t{7}, int64_t{1000}}) {
            std::map<int64_t, int64_t> got;
            for (int64_t c0 = first; c0 < last; c0 += chunk) {
              const int64_t c1 = std::min(last, c0 + chunk);
              for (const auto& w : plan_text_windows_in(first, last, length, step, c0, c1)) {
                ASSERT_LT(w.lo, w.hi);
                for (int64_t p = w.lo; p < w.hi; ++p) {
                  const int64_t t = w.start + p + 1;
                  ASSERT_TRUE(t > c0 && t <= c1) << "target " << t << " outside chunk (" << c0 << ", " << c1 << "]";
                  ASSERT_EQ(got.count(t), 0u) << "target " << t << " scored twice";
                  got[t] = w.start;
                }
              }
            }
            ASSERT_EQ(got, window_of) << "first " << first << " last " << last << " length " << length << " step "
                                      << step << " chunk " << chunk;
          }
        }
      }
    }
  }
}

// A RoPE text run trained `max_iters` steps with short key-token contexts (8 tokens, margin 0.05).
static LoadedRun key_token_run(const TempDir& dir, int max_iters) {
  Config c = tiny_text("rope", corpus_file(dir));
  c.train.max_iters = max_iters;
  c.eval.key_short = 8;
  c.eval.key_margin = 0.05;
  train_new(c, dir.sub("run"));
  return load_run(dir.sub("run"));
}

// Evaluating a chunk of targets at a time gives what evaluating them at once gives: the same targets
// scored, the same key tokens, the same losses up to the order of their sums.
TEST(Eval, ChunksOfTargetsChangeNoResult) {
  TempDir dir;
  auto run = key_token_run(dir, /*max_iters=*/30);
  auto corpus = make_corpus(run.config, run.tokenizer);
  EvalOptions o{{16, 40, 64}, 1, 4, /*stride=*/0, /*tokens=*/300};
  const auto whole = evaluate(run.model, *corpus, run.config, o, make_runtime(run.config));
  o.chunk_targets = 37;
  const auto chunked = evaluate(run.model, *corpus, run.config, o, make_runtime(run.config));
  ASSERT_EQ(whole["results"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const auto &a = whole["results"][i], &b = chunked["results"][i];
    ASSERT_EQ(a["status"], "ok") << a.dump();
    EXPECT_EQ(a["scored_tokens"], b["scored_tokens"]);
    EXPECT_EQ(a["scored_tokens"].get<int64_t>(), 300);
    EXPECT_EQ(a["sliding"]["scored_tokens"], b["sliding"]["scored_tokens"]);
    EXPECT_NEAR(a["loss"].get<double>(), b["loss"].get<double>(), 1e-6);
    EXPECT_NEAR(a["sliding"]["loss"].get<double>(), b["sliding"]["loss"].get<double>(), 1e-6);
    EXPECT_NEAR(a["token_acc"].get<double>(), b["token_acc"].get<double>(), 1e-12);
    EXPECT_EQ(a["key_tokens"]["count"], b["key_tokens"]["count"]);
    EXPECT_GT(a["key_tokens"]["count"].get<int64_t>(), 0);
    EXPECT_NEAR(a["key_tokens"]["loss"].get<double>(), b["key_tokens"]["loss"].get<double>(), 1e-6);
    ASSERT_EQ(a["position_loss"].size(), b["position_loss"].size());
    for (size_t p = 0; p < a["position_loss"].size(); ++p)
      EXPECT_NEAR(a["position_loss"][p].get<double>(), b["position_loss"][p].get<double>(), 1e-6);
  }
}

// Every length and both protocols score the same targets: scored_tokens is the same everywhere,
// the whole validation split by default, and eval.tokens when set.
TEST(Eval, EveryLengthAndProtocolScoresTheSameTargets) {
  TempDir dir;
  Config c = tiny_text("alibi", corpus_file(dir));
  c.train.max_iters = 2;
  train_new(c, dir.sub("run"));
  auto run = load_run(dir.sub("run"));
  auto corpus = make_corpus(run.config, run.tokenizer);
  const int64_t N = static_cast<const TextCorpus&>(*corpus).split_tokens(Split::Val);
  for (int tokens : {0, 1000}) {
    EvalOptions o;
    o.lengths = {32, 48, 64, 128, 256};
    o.tokens = tokens;
    auto eval = evaluate_run(dir.sub("run"), o);
    const int64_t want = tokens > 0 ? tokens : N - 1;
    for (const auto& r : eval["results"]) {
      ASSERT_EQ(r["status"], "ok");
      EXPECT_EQ(r["scored_tokens"].get<int64_t>(), want) << "windows at " << r["length"];
      EXPECT_EQ(r["sliding"]["scored_tokens"].get<int64_t>(), want) << "sliding at " << r["length"];
      EXPECT_EQ(r["first_target"].get<int64_t>(), N - want);
    }
  }
  // Stride 1 puts a sliding window's start on token 0 exactly (N - 1 - L is a multiple of it): that window
  // scores every target before it too, as the one that would start before token 0 does.
  EvalOptions o;
  o.lengths = {8, 12};
  o.stride = 1;
  const auto eval = evaluate_run(dir.sub("run"), o);  // kept: a loop over a temporary's member would dangle
  ASSERT_EQ(eval["results"].size(), 2u);
  for (const auto& r : eval["results"]) {
    ASSERT_EQ(r["status"], "ok");
    EXPECT_EQ(r["sliding"]["scored_tokens"].get<int64_t>(), N - 1) << "sliding at " << r["length"] << ", stride 1";
  }
}

// The documented definition recomputed by hand: the windows protocol over the last 3L targets is the
// mean loss of the three windows of L tokens that end on the split's last token; the sliding protocol
// with stride L is the same computation.
TEST(Eval, WindowsLossIsTheLastWindowsOfTheSplit) {
  TempDir dir;
  Config c = tiny_text("rope", corpus_file(dir));
  c.train.max_iters = 2;
  train_new(c, dir.sub("run"));
  auto run = load_run(dir.sub("run"));
  auto corpus = make_corpus(run.config, run.tokenizer);
  const auto& text = static_cast<const TextCorpus&>(*corpus);
  const int64_t N = text.split_tokens(Split::Val), L = 40;
  const auto val = text.windows(Split::Val, {0}, N)[0];  // the whole split, (N,)
  EvalOptions o{{static_cast<int>(L)}, 1, 2, /*stride=*/static_cast<int>(L), /*tokens=*/static_cast<int>(3 * L)};
  Runtime rt = make_runtime(run.config);
  auto eval = evaluate(run.model, *corpus, run.config, o, rt);
  double sum = 0;
  {
    torch::NoGradGuard no_grad;
    for (int64_t k = 0; k < 3; ++k) {
      const int64_t start = N - 1 - (k + 1) * L;  // inputs start .. start+L-1, targets start+1 .. start+L
      auto x = val.slice(0, start, start + L).unsqueeze(0), y = val.slice(0, start + 1, start + L + 1).unsqueeze(0);
      auto logits = run.model->forward(x);
      sum += torch::nn::functional::cross_entropy(logits.reshape({L, -1}), y.reshape({L})).item<double>();
    }
  }
  const auto& r = eval["results"][0];
  EXPECT_NEAR(r["loss"].get<double>(), sum / 3, 1e-5);
  EXPECT_NEAR(r["sliding"]["loss"].get<double>(), sum / 3, 1e-5);
}

// Key-token loss by its definition, recomputed here one target at a time: the full loss of target j is
// its windows-protocol loss (context from the start of its window of L); the short loss has context from
// end - S, where end is the first of N-1, N-1-S/2, N-1-S, ... at or after j (windows of S moved by S/2,
// each scoring its last S/2 targets); key tokens have short - full > margin.
TEST(Eval, KeyTokensFollowTheirDefinition) {
  TempDir dir;
  auto run = key_token_run(dir, /*max_iters=*/60);
  const auto& c = run.config;
  auto corpus = make_corpus(run.config, run.tokenizer);
  const auto& text = static_cast<const TextCorpus&>(*corpus);
  const int64_t N = text.split_tokens(Split::Val), L = 40, S = 8, T = 3 * L;
  const auto val = text.windows(Split::Val, {0}, N)[0];  // (N,)
  auto loss_at = [&](int64_t from, int64_t j) {           // -log p(token j | tokens from .. j-1)
    auto x = val.slice(0, from, j).unsqueeze(0);          // (1, j - from)
    auto logits = run.model->forward(x);                  // (1, j - from, V)
    return -torch::log_softmax(logits[0][j - from - 1], -1)[val[j].item<int64_t>()].item<double>();
  };
  int64_t count = 0, ambiguous = 0;
  double key_full = 0, key_short = 0;
  {
    torch::NoGradGuard no_grad;
    run.model->eval();
    for (int64_t j = N - T; j <= N - 1; ++j) {
      const int64_t wend = N - 1 - ((N - 1 - j) / L) * L;          // windows of L ending at N-1, N-1-L, ...
      const int64_t send = N - 1 - ((N - 1 - j) / (S / 2)) * (S / 2);  // short windows moved by S/2
      const double full = loss_at(wend - L, j), shrt = loss_at(send - S, j);
      const double gain = shrt - full - c.eval.key_margin;
      if (std::abs(gain) < 1e-4) ++ambiguous;
      if (gain > 0) ++count, key_full += full, key_short += shrt;
    }
  }
  ASSERT_GT(count, 0) << "the check needs some key tokens";
  EvalOptions o{{static_cast<int>(L)}, 1, 4, /*stride=*/0, /*tokens=*/static_cast<int>(T)};
  auto eval = evaluate(run.model, *corpus, run.config, o, make_runtime(run.config));
  const auto& k = eval["results"][0]["key_tokens"];
  ASSERT_TRUE(k.is_object()) << eval["results"][0].dump();
  EXPECT_EQ(k["short_context"].get<int64_t>(), S);
  EXPECT_DOUBLE_EQ(k["margin"].get<double>(), 0.05);
  EXPECT_LE(std::abs(k["count"].get<int64_t>() - count), ambiguous);
  EXPECT_NEAR(k["fraction"].get<double>(), static_cast<double>(k["count"].get<int64_t>()) / T, 1e-12);
  if (ambiguous == 0) {
    EXPECT_NEAR(k["loss"].get<double>(), key_full / count, 1e-4);
    EXPECT_NEAR(k["short_loss"].get<double>(), key_short / count, 1e-4);
  }
}

// Key tokens are off for tasks and with eval.key_short = -1, and the default short context is a quarter
// of the training length.
TEST(Eval, KeyTokensOnlyForTextAndWhenAskedFor) {
  TempDir dir;
  Config c = tiny_text("alibi", corpus_file(dir));
  c.train.max_iters = 2;
  train_new(c, dir.sub("run"));
  auto run = load_run(dir.sub("run"));
  auto corpus = make_corpus(run.config, run.tokenizer);
  EvalOptions o{{32, 64}, 1, 4, 0, 200};
  auto on = evaluate(run.model, *corpus, run.config, o, make_runtime(run.config));
  for (const auto& r : on["results"]) EXPECT_EQ(r["key_tokens"]["short_context"].get<int64_t>(), 32 / 4);
  run.config.eval.key_short = -1;
  auto off = evaluate(run.model, *corpus, run.config, o, make_runtime(run.config));
  for (const auto& r : off["results"]) EXPECT_FALSE(r.contains("key_tokens"));
  // A short context asked for that no length exceeds is refused, not left null at every length (eval
  // --lengths can make it so after training); one length longer than it is enough.
  run.config.eval.key_short = 64;
  try {
    evaluate(run.model, *corpus, run.config, o, make_runtime(run.config));
    ADD_FAILURE() << "eval.key_short 64 with lengths 32 and 64 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("eval.key_short: 64 tokens is not shorter than any length evaluated (the longest is 64)"),
              std::string::npos) << e.what();
  }
  run.config.eval.key_short = 63;
  auto one = evaluate(run.model, *corpus, run.config, o, make_runtime(run.config));
  EXPECT_TRUE(one["results"][0]["key_tokens"].is_null());
  EXPECT_EQ(one["results"][1]["key_tokens"]["short_context"].get<int64_t>(), 63);

  Config t;
  t.data.task = "copy";
  t.data.max_len = 4;
  t.model.n_layer = 1, t.model.n_embd = 32, t.model.block_size = 16;
  t.train.max_iters = 2, t.train.precision = "fp32";
  train_new(t, dir.sub("task"));
  auto task = load_run(dir.sub("task"));
  auto task_corpus = make_corpus(task.config, task.tokenizer);
  EvalOptions ot{{4}, 1, 4, 0, 0};
  auto te = evaluate(task.model, *task_corpus, task.config, ot, make_runtime(task.config));
  EXPECT_FALSE(te["results"][0].contains("key_tokens"));
}
