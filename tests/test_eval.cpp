// Evaluation: reproduces the validation loss at the training length, per-position losses average
// to the reported loss, n/a for lengths an encoding cannot represent, and batch splitting is exact.
#include <gtest/gtest.h>

#include <cmath>

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
  o.batches = 2;
  o.batch_size = 8;
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

TEST(Eval, LearnedTableReportsNotApplicableAndOtherLengthsRun) {
  TempDir dir;
  Config c = tiny_text("learned", corpus_file(dir));
  c.train.max_iters = 3;
  train_new(c, dir.sub("run"));
  EvalOptions o;
  o.lengths = {16, 64, 32};
  o.batches = 1;
  o.batch_size = 4;
  auto eval = evaluate_run(dir.sub("run"), o);
  EXPECT_EQ(eval["results"][0]["status"], "ok");
  EXPECT_EQ(eval["results"][1]["status"], "n/a: learned table has 32 positions");
  EXPECT_TRUE(eval["results"][1]["loss"].is_null());
  EXPECT_EQ(eval["results"][2]["status"], "ok");
}

TEST(Eval, SplittingBatchesForMemoryChangesNothing) {
  TempDir dir;
  Config c = tiny_text("rope", corpus_file(dir));
  c.train.max_iters = 3;
  train_new(c, dir.sub("run"));
  auto run = load_run(dir.sub("run"));
  auto corpus = make_corpus(run.config, run.tokenizer);
  Runtime rt = make_runtime(run.config);
  EvalOptions big{{128}, 1, 8, 0};
  EvalOptions small = big;
  small.memory_budget_bytes = 1;  // one row at a time
  auto a = evaluate(run.model, *corpus, run.config, big, rt), b = evaluate(run.model, *corpus, run.config, small, rt);
  EXPECT_NEAR(a["results"][0]["loss"].get<double>(), b["results"][0]["loss"].get<double>(), 1e-6);
}

TEST(Eval, TaskExactMatchAndAnswerOnlyScoring) {
  TempDir dir;
  Config c;
  c.data.task = "copy";
  c.data.max_len = 4;
  c.model.n_layer = 1;
  c.model.n_embd = 32;
  c.model.block_size = 16;
  c.train.max_iters = 2;
  c.train.precision = "fp32";
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
