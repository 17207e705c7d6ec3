// Training integration: every encoding learns, resume is exact, bad input leaves nothing behind,
// divergence is caught. Tiny models and tens of steps keep this to seconds.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "config/config.h"
#include "model/positional/registry.h"
#include "eval/evaluator.h"
#include "model/bf16_weights.h"
#include "train/run_dir.h"
#include "train/schedule.h"
#include "train/trainer.h"
#include "util/runtime.h"
#include "util/signals.h"

#include <csignal>
#include "test_util.h"

using namespace poslab;
using poslab::testing::TempDir;

static Config tiny_copy(const std::string& kind) {
  Config c;
  c.data.task = "copy";
  c.data.max_len = 6;
  c.data.symbols = 6;
  c.model.n_layer = 2;
  c.model.n_head = 2;
  c.model.n_embd = 32;
  c.model.block_size = 16;
  c.model.pos_encoding.kind = kind;
  c.train.max_iters = 60;
  c.train.batch_size = 16;
  c.train.learning_rate = 3e-3;
  c.train.warmup_iters = 5;
  c.train.eval_interval = 30;
  c.train.eval_iters = 4;
  c.train.log_interval = 10;
  c.train.precision = "fp32";
  c.train.threads = 1;
  return c;
}

static std::vector<nlohmann::json> read_metrics(const std::string& dir) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(RunPaths{dir}.metrics());
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

class TrainEveryKind : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainEveryKind, ShortRunLowersTheLoss) {
  TempDir dir;
  auto result = train_new(tiny_copy(GetParam()), dir.sub("run"));
  ASSERT_EQ(result.status, "done");
  auto rows = read_metrics(dir.sub("run"));
  double first = -1, last = -1;
  for (const auto& r : rows)
    if (r.contains("val_loss")) (first < 0 ? first : last) = r["val_loss"].get<double>();
  EXPECT_LT(last, first - 0.3) << "val loss " << first << " -> " << last;
  for (const char* f : {"config.json", "vocab.json", "checkpoint.pt", "model.pt", "metrics.jsonl", "summary.json"})
    EXPECT_TRUE(std::filesystem::exists(dir.sub("run") + "/" + f)) << f;
  auto summary = read_json_file(RunPaths{dir.sub("run")}.summary());
  for (const char* key : {"final_val_loss", "best_val_loss", "params", "tokens_per_s", "wall_s"})
    EXPECT_TRUE(summary.contains(key)) << key;
}

INSTANTIATE_TEST_SUITE_P(Kinds, TrainEveryKind, ::testing::ValuesIn(encoding_kinds()),
                         [](const auto& info) { return info.param; });

// Trains `c` straight through and stopped at `stop_at` then resumed: the logs must be identical.
static void expect_exact_resume(const Config& c, int stop_at) {
  TempDir dir;
  ASSERT_EQ(train_new(c, dir.sub("straight")).status, "done");
  ASSERT_EQ(train_new(c, dir.sub("split"), stop_at).status, "interrupted");
  ASSERT_EQ(train_resume(dir.sub("split")).status, "done");
  auto a = read_metrics(dir.sub("straight")), b = read_metrics(dir.sub("split"));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i]["step"], b[i]["step"]);
    for (const char* key : {"train_loss", "val_loss", "lr"})
      if (a[i].contains(key)) EXPECT_EQ(a[i][key].get<double>(), b[i][key].get<double>()) << key << " at step " << a[i]["step"];
  }
}

TEST(Resume, StopAndResumeGivesIdenticalLosses) {
  Config c = tiny_copy("rope");
  c.model.dropout = 0.1;  // exercises the torch RNG state in the checkpoint too
  expect_exact_resume(c, /*stop_at=*/25);
}

TEST_P(TrainEveryKind, ResumesExactly) {
  Config c = tiny_copy(GetParam());
  c.train.max_iters = 20;
  c.train.eval_interval = 10;
  expect_exact_resume(c, /*stop_at=*/10);
}

// Randomized positions come from torch's RNG, which the checkpoint holds: resuming draws the same ones.
TEST(Randomize, TrainsAndResumesExactly) {
  for (const char* kind : {"learned", "rope", "fire"}) {
    Config c = tiny_copy(kind);
    c.model.pos_encoding.randomize.max_position = 64;
    c.train.max_iters = 20;
    c.train.eval_interval = 10;
    expect_exact_resume(c, /*stop_at=*/10);
  }
}

// Batch shards: the same step as the whole batch (up to float rounding), and reproducible bit for bit.
// With recast, every kept bfloat16 copy of a weight is dropped before each step (model/bf16_weights.h).
static std::vector<std::pair<std::string, torch::Tensor>> train_steps(const Config& c, int shards, int steps,
                                                                      bool recast = false) {
  auto corpus = make_corpus(c);
  Config cc = c;
  cc.model.vocab_size = static_cast<int>(corpus->tokenizer().size());
  Runtime rt = make_runtime(cc);
  rt.batch_shards = shards;
  torch::manual_seed(7);
  GPT model(cc.model);
  auto optimizer = make_optimizer(model, cc.train);
  Rng rng(11);
  for (int i = 0; i < steps; ++i) {
    if (recast) clear_bf16_weights();
    train_step(model, *optimizer, corpus->batch(Split::Train, cc.train.batch_size, rng), /*lr=*/3e-3,
               /*grad_clip=*/1.0, rt);
  }
  std::vector<std::pair<std::string, torch::Tensor>> params;
  for (const auto& p : model->named_parameters()) params.emplace_back(p.key(), p.value().detach().clone());
  return params;
}

TEST(BatchShards, StepsMatchTheWholeBatchForEveryKind) {
  for (const auto& kind : encoding_kinds()) {
    Config c = tiny_copy(kind);  // variable-length copy examples: shards hold different numbers of scored tokens
    c.train.batch_size = 7;     // uneven shards: 3, 3, 1
    c.train.threads = 2;
    auto whole = train_steps(c, /*shards=*/1, /*steps=*/3), sharded = train_steps(c, /*shards=*/3, /*steps=*/3);
    ASSERT_EQ(whole.size(), sharded.size());
    double largest = 0;
    std::string where;
    for (size_t i = 0; i < whole.size(); ++i) {
      // FIRE's MLP biases add (for the output bias, and an input unit active at every distance) one
      // constant per head to every logit of a row, which softmax ignores: their gradients are rounding
      // noise, and Adam's normalised step turns that noise into lr-sized moves.
      if (whole[i].first == "pos.mlp_out.bias" || whole[i].first == "pos.mlp_in.bias") continue;
      const double d = (whole[i].second - sharded[i].second).abs().max().item<double>();
      if (d > largest) largest = d, where = whole[i].first;
    }
    EXPECT_LT(largest, 1e-5) << kind << ": largest parameter difference " << largest << " in " << where;
    EXPECT_GT(largest, 0.0) << kind << ": suspiciously identical; did the shards run at all?";
  }
}

TEST(BatchShards, AreReproducibleBitForBit) {
  Config c = tiny_copy("rope");
  c.train.threads = 2;
  auto a = train_steps(c, /*shards=*/2, /*steps=*/4), b = train_steps(c, /*shards=*/2, /*steps=*/4);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
}

// The copies the fused AdamW writes are the casts the next step would make: training with them is
// bit for bit training that casts every weight afresh at every step.
TEST(KeptBf16Weights, TrainAsCastingEveryStepWould) {
  Config c = tiny_copy("learned");
  c.train.threads = 2;
  c.train.batch_size = 6;
  c.train.precision = "auto";
  if (!make_runtime(c).bf16) GTEST_SKIP() << "no bf16 on this CPU: no weight is cast";
  auto kept = train_steps(c, /*shards=*/2, /*steps=*/4), recast = train_steps(c, /*shards=*/2, /*steps=*/4, /*recast=*/true);
  ASSERT_EQ(kept.size(), recast.size());
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_TRUE(torch::equal(kept[i].second, recast[i].second)) << kept[i].first;
}

TEST(Resume, StopAndResumeWithBatchShardsGivesIdenticalLosses) {
  TempDir dir;
  Config c = tiny_copy("alibi");
  c.train.threads = 2;
  c.train.batch_shards = 2;
  ASSERT_EQ(train_new(c, dir.sub("straight")).status, "done");
  ASSERT_EQ(train_new(c, dir.sub("split"), /*stop_at=*/25).status, "interrupted");
  ASSERT_EQ(train_resume(dir.sub("split")).status, "done");
  auto a = read_metrics(dir.sub("straight")), b = read_metrics(dir.sub("split"));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].contains("train_loss")) EXPECT_EQ(a[i]["train_loss"].get<double>(), b[i]["train_loss"].get<double>());
}

// Token files (nanoGPT's raw uint16): the licences text's bytes as ids, vocabulary 256.
static Config tiny_tokens(const TempDir& dir) {
  std::ifstream in(std::string(POSLAB_SOURCE_DIR) + "/data/text/licenses.txt", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t cut = text.size() * 9 / 10;
  auto write = [&](const std::string& name, size_t from, size_t to) {
    std::ofstream f(dir.sub(name), std::ios::binary);
    for (size_t i = from; i < to; ++i) f.put(text[i]).put('\0');  // little-endian uint16
  };
  write("train.bin", 0, cut);
  write("val.bin", cut, text.size());
  Config c = tiny_copy("rope");
  c.data.kind = "tokens";
  c.data.dir = dir.path.string();
  c.data.vocab_size = 256;
  c.model.dropout = 0.1;
  return c;
}

TEST(Resume, StopAndResumeOnTokenFilesGivesIdenticalLosses) {
  TempDir data;
  Config c = tiny_tokens(data);
  c.train.max_iters = 30;
  c.train.eval_interval = 10;
  expect_exact_resume(c, /*stop_at=*/15);
}

TEST(Resume, CopiedRunDirectoryResumesToTheSameLosses) {
  TempDir dir;
  Config c = tiny_copy("alibi");
  ASSERT_EQ(train_new(c, dir.sub("a"), /*stop_at=*/30).status, "interrupted");
  std::filesystem::copy(dir.sub("a"), dir.sub("b"), std::filesystem::copy_options::recursive);
  train_resume(dir.sub("a"));
  train_resume(dir.sub("b"));
  auto a = read_json_file(RunPaths{dir.sub("a")}.summary()), b = read_json_file(RunPaths{dir.sub("b")}.summary());
  EXPECT_EQ(a["final_val_loss"].get<double>(), b["final_val_loss"].get<double>());
}

TEST(BadInput, NothingIsWrittenWhenDataIsMissing) {
  TempDir dir;
  Config c = tiny_copy("rope");
  c.data.kind = "text";
  c.data.path = dir.sub("missing.txt");
  EXPECT_THROW(train_new(c, dir.sub("run")), ConfigError);
  EXPECT_FALSE(std::filesystem::exists(dir.sub("run")));
  Config too_long = tiny_copy("rope");
  too_long.data.max_len = 20;  // 41 tokens > block_size 16
  try {
    train_new(too_long, dir.sub("run"));
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("data.max_len"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.sub("run")));
}

TEST(BadInput, ExistingRunIsNotOverwritten) {
  TempDir dir;
  Config c = tiny_copy("none");
  c.train.max_iters = 2;
  train_new(c, dir.sub("run"));
  EXPECT_THROW(train_new(c, dir.sub("run")), ConfigError);
  EXPECT_THROW(train_resume(dir.sub("nothing-here")), ConfigError);
}

TEST(Divergence, NanLossStopsWithFailedSummaryAndKeepsCheckpoint) {
  TempDir dir;
  Config c = tiny_copy("learned");
  c.train.learning_rate = 1e30;
  c.train.min_lr = 0;
  c.train.warmup_iters = 0;
  c.train.grad_clip = 0;
  EXPECT_THROW(train_new(c, dir.sub("run")), DivergenceError);
  auto summary = read_json_file(RunPaths{dir.sub("run")}.summary());
  EXPECT_EQ(summary["status"], "failed");
  EXPECT_NE(summary["error"].get<std::string>().find("at step"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(RunPaths{dir.sub("run")}.checkpoint()));
}

// With checkpoint_interval, a checkpoint comes right after an update that no loss has seen yet: when that
// update diverged (the next step's loss is nan), it must not have replaced the last good checkpoint.
TEST(Divergence, CheckpointBetweenEvaluationsKeepsTheLastGoodOne) {
  TempDir dir;
  Config c = tiny_copy("learned");
  c.train.learning_rate = 1e6;  // finite weights after the update, a nan loss from them
  c.train.warmup_iters = 0;
  c.train.checkpoint_interval = 1;
  EXPECT_THROW(train_new(c, dir.sub("run")), DivergenceError);
  EXPECT_EQ(read_json_file(RunPaths{dir.sub("run")}.summary())["status"], "failed");
  EXPECT_FALSE(std::filesystem::exists(RunPaths{dir.sub("run")}.checkpoint() + ".next"));
  EvalOptions o;
  o.lengths = {6};
  auto e = evaluate_run(dir.sub("run"), o);  // from the checkpoint's weights
  const auto& loss = e["results"][0]["loss"];  // a nan stays a number in memory (null once dumped)
  EXPECT_TRUE(loss.is_number() && std::isfinite(loss.get<double>())) << loss << " at step " << e["step"];
}

// A run whose first validation is already nan (an index encoding scaled past float's range) never wrote a
// checkpoint: its error must not point at one; a later divergence names the one that is kept.
TEST(Divergence, TheErrorNamesACheckpointOnlyWhereOneWasWritten) {
  TempDir dir;
  Config c = tiny_copy("index");
  c.model.pos_encoding.scale = 1e38;
  try {
    train_new(c, dir.sub("first"));
    ADD_FAILURE() << "a nan first validation passed";
  } catch (const DivergenceError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("validation loss is nan at step 0; no checkpoint was written before it"), std::string::npos) << what;
  }
  EXPECT_FALSE(std::filesystem::exists(RunPaths{dir.sub("first")}.checkpoint()));
  Config later = tiny_copy("learned");
  later.train.learning_rate = 1e6;
  later.train.warmup_iters = 0;
  try {
    train_new(later, dir.sub("later"));
    ADD_FAILURE() << "learning rate 1e6 did not diverge";
  } catch (const DivergenceError& e) {
    EXPECT_NE(std::string(e.what()).find("; the last good checkpoint is kept in " + RunPaths{dir.sub("later")}.checkpoint()),
              std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::exists(RunPaths{dir.sub("later")}.checkpoint()));
}

// A stop (signal or --stop-at) between evaluations writes weights that no loss has seen: when the update
// just before it diverged, the stop must say so and keep the last good checkpoint, not pass them on to
// a resume as checked.
TEST(Divergence, StopRightAfterADivergedUpdateKeepsTheLastGoodOne) {
  TempDir dir;
  Config c = tiny_copy("learned");
  c.train.learning_rate = 1e6;  // finite weights after the update, a nan loss from them
  c.train.warmup_iters = 0;
  // First the step whose training loss is nan, running on; then the same run stopped right there.
  int64_t nan_step = -1;
  try {
    train_new(c, dir.sub("probe"));
  } catch (const DivergenceError& e) {
    const std::string what = e.what(), mark = " at step ";  // "training loss is nan at step N" (or -nan, inf)
    ASSERT_EQ(what.rfind("training loss is ", 0), 0u) << what;
    ASSERT_NE(what.find(mark), std::string::npos) << what;
    nan_step = std::stoll(what.substr(what.find(mark) + mark.size()));
  }
  ASSERT_GT(nan_step, 0);
  ASSERT_NE(nan_step % c.train.eval_interval, 0);  // a stop between evaluations
  try {
    train_new(c, dir.sub("run"), /*stop_at=*/nan_step);
    ADD_FAILURE() << "the stop after a diverged update passed";
  } catch (const DivergenceError& e) {
    EXPECT_NE(std::string(e.what()).find("at the stop"), std::string::npos) << e.what();
  }
  const RunPaths paths{dir.sub("run")};
  EXPECT_EQ(read_json_file(paths.summary())["status"], "failed");
  EXPECT_FALSE(std::filesystem::exists(paths.checkpoint() + ".next"));
  EvalOptions o;
  o.lengths = {6};
  auto e = evaluate_run(dir.sub("run"), o);
  EXPECT_EQ(e["step"], 0);  // the checkpoint written by the evaluation at step 0
  const auto& loss = e["results"][0]["loss"];
  EXPECT_TRUE(loss.is_number() && std::isfinite(loss.get<double>())) << loss;

  // An ordinary stop between evaluations still checkpoints its step and resumes from it.
  Config fine = tiny_copy("learned");
  fine.train.max_iters = 4;
  auto stopped = train_new(fine, dir.sub("fine"), /*stop_at=*/3);
  EXPECT_EQ(stopped.status, "interrupted");
  EXPECT_FALSE(std::filesystem::exists(RunPaths{dir.sub("fine")}.checkpoint() + ".next"));
  EXPECT_EQ(train_resume(dir.sub("fine")).status, "done");
}

// A kill -9 between a checkpoint_interval checkpoint and the next step's loss leaves checkpoint.pt.next
// behind: a resume starts from checkpoint.pt and clears the unchecked file rather than keep it forever.
TEST(Divergence, ResumeClearsAnUncheckedCheckpointLeftByAKill) {
  TempDir dir;
  Config c = tiny_copy("learned");
  c.train.max_iters = 6;
  ASSERT_EQ(train_new(c, dir.sub("run"), /*stop_at=*/3).status, "interrupted");
  const RunPaths paths{dir.sub("run")};
  const auto left = paths.checkpoint() + ".next";
  std::filesystem::copy_file(paths.checkpoint(), left);  // as a killed run leaves it
  EXPECT_EQ(train_resume(dir.sub("run")).status, "done");
  EXPECT_FALSE(std::filesystem::exists(left));
  EXPECT_TRUE(std::filesystem::exists(paths.checkpoint()));
}

TEST(Schedule, WarmupThenCosineToMinLr) {
  TrainConfig t;
  t.learning_rate = 1.0;
  t.min_lr = 0.1;
  t.warmup_iters = 10;
  t.max_iters = 110;
  EXPECT_NEAR(learning_rate_at(t, 0), 1.0 / 11, 1e-12);
  EXPECT_NEAR(learning_rate_at(t, 10), 1.0, 1e-12);
  EXPECT_NEAR(learning_rate_at(t, 60), 0.55, 1e-12);  // halfway down the cosine
  EXPECT_NEAR(learning_rate_at(t, 110), 0.1, 1e-12);
  for (int s = 11; s < 110; ++s) EXPECT_LE(learning_rate_at(t, s), learning_rate_at(t, s - 1));
}

TEST(Checkpoint, CorruptOrTruncatedFileGivesClearError) {
  TempDir dir;
  Config c = tiny_copy("rope");
  c.train.max_iters = 2;
  train_new(c, dir.sub("run"));
  const auto ckpt = RunPaths{dir.sub("run")}.checkpoint();
  auto size = std::filesystem::file_size(ckpt);
  std::filesystem::resize_file(ckpt, size / 2);
  try {
    load_run(dir.sub("run"));
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated or corrupt"), std::string::npos) << e.what();
  }
}

// A run whose vocab.json is gone is named as the run, whatever reads it (eval, probe, resume), not as a config.
TEST(Checkpoint, MissingVocabularyIsNamedAsTheRuns) {
  TempDir dir;
  Config c = tiny_copy("rope");
  c.train.max_iters = 2;
  train_new(c, dir.sub("run"));
  std::filesystem::remove(RunPaths{dir.sub("run")}.vocab());
  for (int resume = 0; resume < 2; ++resume) {
    try {
      if (resume) train_resume(dir.sub("run"));
      else load_run(dir.sub("run"));
      ADD_FAILURE();
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), "run " + dir.sub("run") + ": vocab.json, the run's vocabulary, is missing");
    }
  }
}

TEST(Checkpoint, OtherEncodingOrShapeIsRefused) {
  TempDir dir;
  Config c = tiny_copy("rope");
  c.train.max_iters = 2;
  train_new(c, dir.sub("run"));
  c.model.vocab_size = 46;
  c.model.pos_encoding.kind = "alibi";
  GPT other(c.model);
  EXPECT_THROW(load_checkpoint(RunPaths{dir.sub("run")}.checkpoint(), other, nullptr), ConfigError);
  c.model.pos_encoding.kind = "rope";
  c.model.n_head = 4;  // the same shapes, split into other heads
  GPT other_heads(c.model);
  try {
    load_checkpoint(RunPaths{dir.sub("run")}.checkpoint(), other_heads, nullptr);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("trained with model.n_head 2, but the config asks for 4"), std::string::npos) << e.what();
  }
  c.model.n_head = 2;
  c.model.n_embd = 64;
  GPT wider(c.model);
  try {
    load_checkpoint(RunPaths{dir.sub("run")}.checkpoint(), wider, nullptr);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("has shape"), std::string::npos) << e.what();
  }
}

TEST(Signals, FirstAsksToStopSecondExitsAtOnce) {
  // In a child process: the first SIGINT only sets the flag the loop polls; one within the second after it is
  // the same stop arriving twice (the terminal's and compare's) and changes nothing; one later exits 130.
  EXPECT_EXIT(
      {
        install_stop_handlers();
        std::raise(SIGINT);
        if (!stop_requested()) std::_Exit(3);
        std::raise(SIGTERM);
        std::this_thread::sleep_for(std::chrono::milliseconds(1100));
        std::raise(SIGINT);
        std::_Exit(4);  // not reached
      },
      ::testing::ExitedWithCode(130), "second signal, exiting now");
  EXPECT_EXIT(
      {
        install_stop_handlers();
        std::raise(SIGINT);
        std::raise(SIGINT);
        std::_Exit(stop_requested() ? 5 : 3);
      },
      ::testing::ExitedWithCode(5), "stopping after this step");
}

// Found by fuzz_checkpoint: a damaged archive made LibTorch's reader segfault. The frame's length
// and checksum now refuse such files before LibTorch sees them.
TEST(Checkpoint, FuzzRegressionDamagedArchiveIsRefusedBeforeLibTorch) {
  TempDir dir;
  Config c = tiny_copy("rope");
  c.train.max_iters = 2;
  train_new(c, dir.sub("run"));
  auto model = load_run(dir.sub("run")).model;
  const std::string crash = std::string(POSLAB_SOURCE_DIR) + "/tests/fuzz/regressions/checkpoint/libtorch-segv.pt";
  EXPECT_THROW(load_checkpoint(crash, model, nullptr), ConfigError);
  // One flipped byte anywhere in a good checkpoint is caught by the checksum.
  const auto path = RunPaths{dir.sub("run")}.checkpoint();
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const auto middle = static_cast<std::streamoff>(std::filesystem::file_size(path) / 2);
  f.seekg(middle);
  const char was = static_cast<char>(f.get());
  f.seekp(middle);
  f.put(static_cast<char>(was ^ 0x5a));  // always a change (writing a fixed byte missed when it was there already)
  f.close();
  try {
    load_checkpoint(path, model, nullptr);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
}

// --init-from: a new run from another's weights, at a longer block_size with a rope scaling
// that stays on for the run; mismatches refused before any directory appears.
TEST(InitFrom, FineTunesAtALongerContextWithTheScalingOn) {
  TempDir dir;
  auto base = tiny_copy("rope");
  base.train.max_iters = 20;
  ASSERT_EQ(train_new(base, dir.sub("base")).status, "done");
  auto longer = base;
  longer.model.block_size = 64;
  longer.data.max_len = 12;
  longer.model.pos_encoding.rope_scaling.kind = "linear";
  longer.model.pos_encoding.rope_scaling.factor = 4;
  longer.train.max_iters = 1;  // one step at a negligible rate: the weights stay the source's
  longer.train.learning_rate = 1e-9, longer.train.min_lr = 1e-10;
  ASSERT_EQ(train_new(longer, dir.sub("ft"), 0, dir.sub("base")).status, "done");
  auto ft = load_run(dir.sub("ft"));
  auto src = load_run(dir.sub("base"));
  EXPECT_EQ(ft.state.step, 1) << "a new run counts its own steps from 0";
  EXPECT_EQ(ft.config.model.pos_encoding.rope_scaling.original_length, 16) << "filled with the source's block_size";
  EXPECT_EQ(ft.model->pos->rope_scaling().kind, "linear") << "the trained-with scaling is on after loading";
  auto a = ft.model->named_parameters(), b = src.model->named_parameters();
  for (const auto& p : a) EXPECT_TRUE(torch::allclose(p.value(), b[p.key()], 0, 1e-6)) << p.key();
  EXPECT_TRUE(std::filesystem::exists(RunPaths{dir.sub("ft")}.init_from()));
  // Stopped before its first checkpoint (here: the checkpoint and what follows it removed), the fine-tune
  // resumes from its source's weights again, not from random ones.
  std::filesystem::copy(dir.sub("ft"), dir.sub("ft-killed"), std::filesystem::copy_options::recursive);
  for (const auto& f : {RunPaths{dir.sub("ft-killed")}.checkpoint(), RunPaths{dir.sub("ft-killed")}.summary(),
                        RunPaths{dir.sub("ft-killed")}.eval(), dir.sub("ft-killed") + "/model.pt"})
    std::filesystem::remove(f);
  ASSERT_EQ(train_resume(dir.sub("ft-killed")).status, "done");
  auto resumed = load_run(dir.sub("ft-killed"));
  for (const auto& p : resumed.model->named_parameters())
    EXPECT_TRUE(torch::allclose(p.value(), b[p.key()], 0, 1e-6)) << "resumed before a checkpoint: " << p.key();
  // Evaluation keeps the trained-with scaling unless asked otherwise.
  EvalOptions eo;
  eo.lengths = {12};
  eo.batches = 1;
  EXPECT_EQ(evaluate_run(dir.sub("ft"), eo)["rope_scaling"]["kind"], "linear");
  eo.rope_scaling = RopeScalingConfig{};  // an explicit "none"
  EXPECT_EQ(evaluate_run(dir.sub("ft"), eo)["rope_scaling"], "none");
}

TEST(InitFrom, RefusesMismatchesAndLeavesNothingBehind) {
  TempDir dir;
  auto base = tiny_copy("learned");
  base.train.max_iters = 2;
  ASSERT_EQ(train_new(base, dir.sub("base")).status, "done");
  auto expect_refused = [&](Config c, const std::string& from, const std::string& fragment) {
    try {
      train_new(c, dir.sub("new"), 0, from);
      ADD_FAILURE() << "accepted; wanted '" << fragment << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(dir.sub("new")));
  };
  auto wider = base;
  wider.model.n_embd = 64;
  expect_refused(wider, dir.sub("base"), "model.n_embd is 32 there but 64 here");
  auto rope = base;
  rope.model.pos_encoding.kind = "rope";
  expect_refused(rope, dir.sub("base"), "model.pos_encoding.kind is learned there but rope here");
  auto longer = base;
  longer.model.block_size = 32;
  expect_refused(longer, dir.sub("base"), "a learned position table cannot grow from 16 to 32 rows");
  expect_refused(base, dir.sub("nowhere"), "no run here");
  auto other_vocab = base;  // a text corpus: its characters, not the tasks' alphabet
  other_vocab.data.kind = "text";
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the quick brown fox jumps over the lazy dog\n";
  other_vocab.data.path = dir.file("text.txt", text);
  expect_refused(other_vocab, dir.sub("base"), "vocabulary");
  EXPECT_NO_THROW(train_new(base, dir.sub("same"), 0, dir.sub("base")));  // same shapes: fine
}

// The precision a run trained in is kept in its checkpoint (a run killed before its summary was written keeps
// it too) and read back before the summary's; a summary that cannot say gives "" (auto chooses anew), never a
// throw; an explicit train.precision is never replaced, and auto is replaced only by a precision that runs here.
TEST(Checkpoint, KeepsThePrecisionTheRunTrainedIn) {
  TempDir dir;
  Config c = tiny_copy("rope");
  c.train.max_iters = 2;
  c.train.precision = "fp32";
  train_new(c, dir.sub("run"));
  const RunPaths run{dir.sub("run")};
  EXPECT_EQ(checkpoint_precision(run.checkpoint()), "fp32");
  c.model.vocab_size = 46;
  GPT model(c.model);
  EXPECT_EQ(load_checkpoint(run.checkpoint(), model, nullptr).precision, "fp32");
  EXPECT_EQ(recorded_precision(run, "bf16"), "bf16");  // the checkpoint's first
  EXPECT_EQ(recorded_precision(run, ""), "fp32");      // else the summary's
  for (const char* summary : {R"({"precision": 5})", R"({"precision": null})", R"({"precision": "fp16"})", "[]",
                              R"({"precision": "bf16", "status": )", ""}) {
    std::ofstream(run.summary()) << summary;
    EXPECT_EQ(recorded_precision(run, ""), "") << summary;
  }
  std::filesystem::remove(run.summary());
  EXPECT_EQ(recorded_precision(run, ""), "");
  Config automatic = c;
  automatic.train.precision = "auto";
  EXPECT_EQ(with_precision(automatic, "fp32").train.precision, "fp32");
  EXPECT_EQ(with_precision(automatic, "").train.precision, "auto");
  EXPECT_EQ(with_precision(c, "bf16").train.precision, "fp32");  // explicit: kept
  automatic.device = "cpu";
  EXPECT_EQ(with_precision(automatic, "bf16").train.precision, cpu_has_bf16() ? "bf16" : "auto");
}

// train --out takes a new or empty directory, or one a stopped start left (its lock, vocab.json, tokenizer.model,
// an atomic write's hidden temporary); any other file is named, the first by name whatever the listing's order.
TEST(RunDir, FileNotOfARunNamesTheFirstForeignFile) {
  TempDir dir;
  const std::string d = dir.path.string();
  EXPECT_EQ(file_not_of_a_run(d + "/missing"), "");
  EXPECT_EQ(file_not_of_a_run(d), "");
  dir.file(".train.lock", "");
  dir.file("vocab.json", "{}");
  dir.file("tokenizer.model", "x");
  dir.file(".config.json.tmp", "{");
  dir.file("slurm-12.log", "started");  // a scheduler's log, written before poslab starts
  EXPECT_EQ(file_not_of_a_run(d), "");
  dir.file("catalog", "mine");  // no suffix: not a log
  EXPECT_EQ(file_not_of_a_run(d), "catalog");
  for (const std::string name : {"notes.txt", "b.csv", "zz", "a-data", "a.log.txt"}) dir.file(name, "mine");
  EXPECT_EQ(file_not_of_a_run(d), "a-data");
  std::filesystem::create_directories(dir.path / "A-sub");  // a folder counts like a file ('A' sorts before 'a')
  EXPECT_EQ(file_not_of_a_run(d), "A-sub");
}
