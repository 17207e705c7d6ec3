// Distributed launch detection (the launchers' variables), the gradient bucket plan and the config
// comparison of the rendezvous; the process group itself is tested with real processes in
// tests/cli/distributed.sh.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "config/config.h"
#include "distributed/buckets.h"
#include "distributed/distributed.h"
#include "distributed/launch.h"
#include "distributed/rendezvous.h"

using namespace poslab;

static Launch detect(const std::map<std::string, std::string>& vars) {
  return detect_launch([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

static std::string refusal(const std::map<std::string, std::string>& vars) {
  try {
    detect(vars);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Launch, NoVariablesOrAWorldOfOneIsASingleProcess) {
  EXPECT_FALSE(detect({}).distributed());
  EXPECT_FALSE(detect({{"RANK", "0"}, {"WORLD_SIZE", "1"}}).distributed());  // torchrun --nproc_per_node 1
  EXPECT_FALSE(detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).distributed());  // a plain sbatch job
}

TEST(Launch, TorchrunWithItsAgentStore) {
  auto l = detect({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                   {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29400"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                   {"TORCHELASTIC_RESTART_COUNT", "2"}});
  EXPECT_TRUE(l.distributed());
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.world_size, 4);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.local_world_size, 2);
  EXPECT_EQ(l.master_addr, "10.0.0.1");
  EXPECT_EQ(l.master_port, 29400);
  EXPECT_TRUE(l.agent_store);
  EXPECT_EQ(l.restart_count, "2");
}

TEST(Launch, SlurmThenOpenMpiAndTorchrunVariablesWin) {
  auto slurm = detect({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                       {"SLURM_NTASKS_PER_NODE", "4"}, {"MASTER_ADDR", "node1"}});
  EXPECT_EQ(slurm.launcher, "slurm");
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.local_world_size, 4);
  EXPECT_EQ(slurm.master_port, 29500);  // the default
  EXPECT_FALSE(slurm.agent_store);
  auto mpi = detect({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"MASTER_ADDR", "h"}});
  EXPECT_EQ(mpi.launcher, "mpirun");
  EXPECT_EQ(mpi.local_rank, 1);
  // torchrun started inside a Slurm job: its own variables describe the ranks.
  auto both = detect({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"},
                      {"MASTER_ADDR", "h"}});
  EXPECT_EQ(both.world_size, 2);
  EXPECT_EQ(both.rank, 1);
  // Slurm's "2(x3)" form of tasks per node is not a count: left unknown.
  EXPECT_EQ(detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "6"}, {"SLURM_NTASKS_PER_NODE", "2(x3)"},
                    {"MASTER_ADDR", "h"}}).local_world_size, 0);
}

TEST(Launch, BadVariablesAreRefusedByName) {
  EXPECT_NE(refusal({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}).find("RANK=2 must be below WORLD_SIZE=2"),
            std::string::npos);
  EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "2x"}}).find("WORLD_SIZE='2x' is not an integer"), std::string::npos);
  EXPECT_NE(refusal({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}).find("RANK='-1'"), std::string::npos);
  EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "2"}}).find("MASTER_ADDR is not set"), std::string::npos);
  EXPECT_NE(refusal({{"WORLD_SIZE", "2"}}).find("RANK is missing"), std::string::npos);
  EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}})
                .find("MASTER_PORT='70000'"),
            std::string::npos);
  EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "x"}, {"MASTER_ADDR", "h"}}).find("LOCAL_RANK"),
            std::string::npos);
}

TEST(Buckets, ConsecutiveTensorsUpToTheCap) {
  // 100, 200, 50, 400 floats with a 1200-byte (300-float) cap: [100, 200] [50] [400 alone, over the cap].
  std::vector<torch::Tensor> ts = {torch::zeros({10, 10}), torch::zeros({200}), torch::zeros({5, 10}),
                                   torch::zeros({400})};
  auto b = plan_buckets(ts, 1200);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].first, 0u);
  EXPECT_EQ(b[0].last, 2u);
  EXPECT_EQ(b[0].numel, 300);
  EXPECT_EQ(b[0].offsets, (std::vector<int64_t>{0, 100}));
  EXPECT_EQ(b[1].numel, 50);
  EXPECT_EQ(b[2].first, 3u);
  EXPECT_EQ(b[2].numel, 400);
  // Another dtype starts a bucket: a flat buffer has one dtype.
  auto mixed = plan_buckets({torch::zeros({2}), torch::zeros({2}, torch::kDouble)}, 1 << 20);
  EXPECT_EQ(mixed.size(), 2u);
}

TEST(Buckets, FlattenAndBackRoundTrips) {
  std::vector<torch::Tensor> ts = {torch::arange(6, torch::kFloat).view({2, 3}), torch::arange(4, torch::kFloat) + 10};
  auto b = plan_buckets(ts, 1 << 20);
  ASSERT_EQ(b.size(), 1u);
  auto flat = flatten(ts, b[0]);
  EXPECT_TRUE(torch::equal(flat, torch::tensor({0, 1, 2, 3, 4, 5, 10, 11, 12, 13}, torch::kFloat)));
  std::vector<torch::Tensor> out = {torch::zeros({2, 3}), torch::zeros({4})};
  unflatten_into(flat * 2, out, b[0]);
  EXPECT_TRUE(torch::equal(out[0], ts[0] * 2));
  EXPECT_TRUE(torch::equal(out[1], ts[1] * 2));
}

TEST(ConfigDifference, TheFirstKeyInSortedOrderWithBothValues) {
  const auto c = config_to_json(Config{});
  EXPECT_FALSE(first_difference(c, c).has_value());
  auto other = c;
  other["train"]["learning_rate"] = 0.05;
  other["train"]["max_iters"] = 7;  // "learning_rate" sorts first
  const auto d = first_difference(other, c);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->key, "train.learning_rate");
  EXPECT_EQ(d->here, "0.05");
  EXPECT_EQ(d->there, "0.001");
  // Strings without quotes; arrays whole, by their key; a key one side lacks.
  other = c;
  other["model"]["pos_encoding"]["kind"] = "rope";
  EXPECT_EQ(first_difference(other, c)->here, "rope");
  other = c;
  other["eval"]["lengths"] = {16, 64};
  EXPECT_EQ(first_difference(other, c)->key, "eval.lengths");
  EXPECT_EQ(first_difference(other, c)->here, "[16,64]");
  other = c;
  other["model"]["pos_encoding"]["alpha"] = 2;  // a plug-in's option
  EXPECT_EQ(first_difference(c, other)->key, "model.pos_encoding.alpha");
  EXPECT_EQ(first_difference(c, other)->here, "(none)");
  // A key that differs is named before what it resolved to.
  auto a = c, b = c;
  a["resolved"]["precision"] = "bf16", b["resolved"]["precision"] = "fp32";
  EXPECT_EQ(first_difference(a, b)->key, "resolved.precision");
  b["train"]["precision"] = "fp32";
  EXPECT_EQ(first_difference(a, b)->key, "train.precision");
  // Numbers compare by value once both sides went through the same text (the store carries JSON text).
  EXPECT_FALSE(first_difference(nlohmann::json::parse(c.dump()), nlohmann::json::parse(c.dump())).has_value());
}

// A rank's refusal names the key, both values and what to do; for the precision auto resolved differently on two
// machines (or two timings), the fix is an explicit train.precision, not "the same config" (it is the same).
TEST(MismatchMessage, PrecisionAdvisesAnExplicitSetting) {
  const nlohmann::json verdict = {{"rank", 1}, {"key", "resolved.precision"}, {"value", "bf16"}, {"rank0", "fp32"}};
  const std::string on1 = poslab::mismatch_message(verdict, 1), on0 = poslab::mismatch_message(verdict, 0);
  EXPECT_NE(on1.find("at resolved.precision: bf16 here, fp32 on rank 0"), std::string::npos) << on1;
  EXPECT_NE(on0.find("at resolved.precision: bf16 on rank 1, fp32 here"), std::string::npos) << on0;
  for (const auto& m : {on0, on1}) {
    EXPECT_NE(m.find("set train.precision to fp32 or bf16 for every rank"), std::string::npos) << m;
    EXPECT_EQ(m.find("launch them all with the same config"), std::string::npos) << m;
  }
}
