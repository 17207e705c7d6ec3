// Experiment grids: expansion over any keys, invalid cells refused before any trains, and aggregates that equal
// the numbers in the cells' own eval.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "config/config.h"
#include "experiment/experiment.h"
#include "experiment/runner_parts.h"
#include "train/run_dir.h"
#include "util/files.h"
#include "test_util.h"

using namespace poslab;
using poslab::testing::TempDir;
using nlohmann::json;

static std::string write_experiment(const TempDir& dir, const std::string& grid) {
  dir.file("base.json", R"({"data": {"task": "copy", "max_len": 4}, "model": {"block_size": 16}})");
  return dir.file("exp.json", R"({"name": "t", "base": "base.json", "set": {"train.max_iters": 3}, "grid": )" + grid + "}");
}

TEST(Grid, CartesianProductOverAnyKeys) {
  TempDir dir;
  auto e = load_experiment(write_experiment(dir, R"({"model.pos_encoding.kind": ["rope", "alibi"], "data.task": ["copy", "sort"], "seed": [1, 2]})"));
  ASSERT_EQ(e.cells.size(), 8u);
  EXPECT_EQ(e.cells[0].name, "kind=rope_task=copy_seed=1");
  EXPECT_EQ(e.cells[1].name, "kind=rope_task=copy_seed=2");
  EXPECT_EQ(e.cells[2].name, "kind=rope_task=sort_seed=1");
  EXPECT_EQ(e.cells[7].name, "kind=alibi_task=sort_seed=2");
  EXPECT_EQ(e.cells[2].group, "kind=rope, task=sort");
  EXPECT_EQ(e.group_keys, (std::vector<std::string>{"model.pos_encoding.kind", "data.task"}));
  EXPECT_EQ(e.cells[2].config["data"]["task"], "sort");
  EXPECT_EQ(e.cells[2].config["train"]["max_iters"], 3);  // "set" applies to every cell
  EXPECT_EQ(e.cells[1].config["seed"], 2);
}

TEST(Grid, NonEncodingKeyAloneNamesTheGroup) {
  TempDir dir;
  auto e = load_experiment(write_experiment(dir, R"({"model.n_layer": [1, 2]})"));
  ASSERT_EQ(e.cells.size(), 2u);
  EXPECT_EQ(e.cells[1].group, "2");
  EXPECT_EQ(e.cells[1].config["model"]["n_layer"], 2);
}

// An experiment's set and grid name files relative to the experiment file, as a config names them relative to
// itself; each cell's config holds them absolute.
TEST(Grid, FilePathsInSetAndGridAreRelativeToTheExperimentFile) {
  TempDir dir;
  std::filesystem::create_directories(dir.path / "exp");
  dir.file("base.json", R"({"data": {"kind": "text"}, "model": {"block_size": 16}})");
  auto path = dir.file("exp/e.json", R"({"name": "t", "base": "../base.json", "set": {"data.tokenizer.model": "sp.model"},
                                         "grid": {"data.path": ["a.txt", "../b.txt"]}})");
  auto e = load_experiment(path);
  ASSERT_EQ(e.cells.size(), 2u);
  for (const auto& cell : e.cells) EXPECT_EQ(cell.config["data"]["tokenizer"]["model"], (dir.path / "exp" / "sp.model").string());
  EXPECT_EQ(e.cells[0].config["data"]["path"], (dir.path / "exp" / "a.txt").string());
  EXPECT_EQ(e.cells[1].config["data"]["path"], (dir.path / "b.txt").lexically_normal().string());
}

// Every cell is validated when the file is read, before any trains; errors name the file's own keys.
static std::string load_error(const std::string& path) {
  try {
    load_experiment(path);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Grid, InvalidCellRefusesTheWholeGrid) {
  TempDir dir;
  const std::string err = load_error(write_experiment(dir, R"({"model.n_head": [2, 3]})"));  // 64 % 3 != 0
  EXPECT_NE(err.find(": cell n_head=3: model.n_embd must be divisible"), std::string::npos) << err;
  const std::string kind = load_error(write_experiment(dir, R"({"model.pos_encoding.kind": ["rope", "ropee"]})"));
  EXPECT_NE(kind.find("cell kind=ropee: model.pos_encoding.kind: unknown encoding 'ropee'"), std::string::npos) << kind;
  const std::string key = load_error(write_experiment(dir, R"({"model.n_layr": [1]})"));
  EXPECT_NE(key.find(": grid.model.n_layr: unknown key 'model.n_layr'"), std::string::npos) << key;
  EXPECT_EQ(key.find("--set"), std::string::npos) << key;
  const std::string type = load_error(write_experiment(dir, R"({"model.n_layer": [1, "two"]})"));
  EXPECT_NE(type.find(": grid.model.n_layer"), std::string::npos) << type;
  // Probes that cannot run on a cell are refused now, not after every cell trained.
  dir.file("mqar.json", R"({"data": {"task": "mqar", "max_len": 2}, "model": {"block_size": 16}})");
  const std::string short_mqar = load_error(dir.file("m.json", R"({"base": "mqar.json", "grid": {"model.pos_encoding.kind":
      ["rope"]}, "probes": {"mqar": {"lengths": [2, 9], "trials": 3}}})"));
  EXPECT_NE(short_mqar.find(": cell kind=rope: probes.mqar.lengths: 2 tokens is too short for mqar"), std::string::npos)
      << short_mqar;
  EXPECT_EQ(load_error(dir.file("m.json", R"({"base": "mqar.json", "grid": {"model.pos_encoding.kind": ["rope"]},
      "probes": {"mqar": {"lengths": [9, 16], "trials": 3}}})")), "");
  const std::string passkey = load_error(dir.file("p.json", R"({"base": "base.json", "grid": {"model.pos_encoding.kind":
      ["rope"]}, "probes": {"passkey": {"lengths": [16], "trials": 3}}})"));
  EXPECT_NE(passkey.find(": cell kind=rope: probes.passkey needs a run trained on text"), std::string::npos) << passkey;
  // Data files in set or grid on a base that never chose a kind: the cells would train the default task.
  dir.file("nokind.json", R"({"model": {"block_size": 16}})");
  const std::string nokind = load_error(dir.file("d.json", R"({"base": "nokind.json", "set": {"data.dir": "corpus"},
      "grid": {"model.pos_encoding.kind": ["rope"]}})"));
  EXPECT_NE(nokind.find(": cell kind=rope: data.dir names data, but data.kind is not set"), std::string::npos) << "[" << nokind << "]";
}

// A data key that no cell's kind reads: a grid over it trains one model under several names (data.task over
// text cells gave identical rows "task=copy" and "task=reverse"); set, it is as silently ignored.
TEST(Grid, DataKeysNoCellReadsAreRefused) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 100; ++i) text += "some text to train on. ";
  dir.file("t.txt", text);
  dir.file("text.json", R"({"data": {"kind": "text", "path": "t.txt", "max_len": 4}, "model": {"block_size": 16}})");
  const std::string task = load_error(dir.file("g.json", R"({"base": "text.json", "grid": {"data.task": ["copy", "reverse"]}})"));
  EXPECT_NE(task.find(": grid.data.task: read by data.kind task, but every cell trains on data.kind text: its values would "
                      "train the same model"), std::string::npos) << task;
  const std::string set = load_error(dir.file("s.json", R"({"base": "text.json", "set": {"data.symbols": 8},
      "grid": {"model.pos_encoding.kind": ["rope"]}})"));
  EXPECT_NE(set.find(": set.data.symbols: read by data.kind task, but every cell trains on data.kind text"), std::string::npos) << set;
  // data.mqar.* is read by the mqar task only.
  const std::string mqar = load_error(write_experiment(dir, R"({"data.mqar.queries": [1, 2]})"));
  EXPECT_NE(mqar.find(": grid.data.mqar.queries: read by data.kind task with data.task mqar, but every cell trains on "
                      "data.task copy"), std::string::npos) << mqar;
  // Read by some cells: allowed (those cells differ), the others said to repeat one another.
  EXPECT_EQ(load_error(dir.file("k.json", R"({"base": "text.json", "grid": {"data.kind": ["text", "task"],
      "data.task": ["copy", "sort"]}})")), "");
  EXPECT_EQ(load_error(write_experiment(dir, R"({"data.task": ["copy", "sort"]})")), "");
}

// Two eval_grid variants that set the same keys to the same values (in any order) evaluate every cell twice.
TEST(Grid, EvalGridVariantsThatSetTheSameAreRefused) {
  TempDir dir;
  dir.file("base.json", R"({"data": {"task": "copy", "max_len": 4}, "model": {"block_size": 16}})");
  auto exp = [&](const std::string& variants) {
    return dir.file("v.json", R"({"name": "t", "base": "base.json", "grid": {"seed": [1]}, "eval_grid": )" + variants + "}");
  };
  EXPECT_NE(load_error(exp(R"({"a": {"eval.batches": 2, "eval.stride": 3}, "b": {"eval.stride": 3, "eval.batches": 2}})"))
                .find("eval_grid.b: sets what eval_grid.a sets; each variant must differ"),
            std::string::npos);
  EXPECT_NE(load_error(exp(R"({"plain": {}, "again": {}})")).find("eval_grid.again: sets what eval_grid.plain sets (nothing"),
            std::string::npos);
  EXPECT_EQ(load_error(exp(R"({"a": {"eval.batches": 2}, "b": {"eval.batches": 3}, "c": {}})")), "");
}

TEST(Grid, BadExperimentFilesAreRefused) {
  TempDir dir;
  EXPECT_THROW(load_experiment(write_experiment(dir, R"({"model.nope": [1]})")), ConfigError);
  EXPECT_THROW(load_experiment(write_experiment(dir, R"({"seed": []})")), ConfigError);
  EXPECT_NE(load_error(dir.file("s.json", R"({"base": "base.json", "grid": {"model.n_layer": [1]}, "seeds": [1, 4294967296]})"))
                .find(": seeds must be a non-empty list of integers from 0 to 2147483647"),
            std::string::npos);
  EXPECT_THROW(load_experiment(dir.file("x.json", R"({"base": "base.json", "grid": {"seed": [1]}, "extra": 1})")), ConfigError);
  // The name is the default output folder, runs/NAME: a path there would write outside runs/ or into it.
  for (const char* name : {"", ".", "..", "../../escaped", "/tmp/abs", "a/b"}) {
    const std::string err = load_error(dir.file("n.json", json{{"name", name}, {"base", "base.json"}, {"grid", {{"seed", {1}}}}}.dump()));
    EXPECT_NE(err.find("must be a folder's name"), std::string::npos) << "name '" << name << "': " << err;
  }
  EXPECT_NE(load_error(dir.file("n.json", R"({"name": 3, "base": "base.json", "grid": {"seed": [1]}})")).find("name must be a string"),
            std::string::npos);
  EXPECT_NE(load_error(dir.file("e.json", R"({"base": "base.json", "grid": {}})")).find("grid is empty"), std::string::npos);
  EXPECT_EQ(load_error(dir.file("ok.json", R"({"name": "my run-2.b", "base": "base.json", "grid": {"seed": [1]}})")), "");
}

// Writes a finished cell by hand: summary.json + eval.json with given numbers.
static void fake_cell(const std::string& dir, double loss, double exact, bool na_at_32) {
  std::filesystem::create_directories(dir);
  write_file_atomic(dir + "/summary.json",
                    json{{"status", "done"}, {"params", 1000}, {"tokens_per_s", 5000.0}, {"wall_s", 2.0}, {"final_val_loss", loss}}.dump());
  json r16 = {{"length", 16}, {"tokens", 33}, {"status", "ok"}, {"loss", loss}, {"ppl", std::exp(loss)},
              {"token_acc", 0.9}, {"exact_match", exact}, {"position_loss", json::array()}};
  json r32 = na_at_32 ? json{{"length", 32}, {"tokens", 65}, {"status", "n/a: learned table has 64 positions"}, {"loss", nullptr},
                             {"ppl", nullptr}, {"token_acc", nullptr}, {"exact_match", nullptr}}
                      : json{{"length", 32}, {"tokens", 65}, {"status", "ok"}, {"loss", 2 * loss}, {"ppl", std::exp(2 * loss)},
                             {"token_acc", 0.5}, {"exact_match", exact / 2}};
  write_file_atomic(dir + "/eval.json", json{{"encoding", "x"}, {"data", "copy"}, {"length_unit", "items"},
                                              {"train_length", 16}, {"results", {r16, r32}}}.dump());
}

TEST(Aggregate, MeansAndStdsEqualTheCellsOwnNumbers) {
  TempDir dir;
  auto e = load_experiment(write_experiment(dir, R"({"model.pos_encoding.kind": ["rope", "learned"], "seed": [1, 2]})"));
  const std::string out = dir.sub("out");
  fake_cell(out + "/cells/kind=rope_seed=1", 0.2, 0.9, false);
  fake_cell(out + "/cells/kind=rope_seed=2", 0.4, 0.7, false);
  fake_cell(out + "/cells/kind=learned_seed=1", 0.1, 1.0, true);
  // kind=learned_seed=2 never ran
  json r = aggregate_results(e, out);
  EXPECT_EQ(r["metric"], "exact_match");
  EXPECT_EQ(r["train_tokens"], 33);
  auto row = [&](const std::string& g, int L) {
    for (const auto& x : r["rows"])
      if (x["group"] == g && x["length"] == L) return x;
    return json();
  };
  EXPECT_NEAR(row("rope", 16)["loss_mean"].get<double>(), 0.3, 1e-12);
  // Sample std over the seeds (n - 1), and the 95% half-width t(0.975, 1) * std / sqrt(2).
  EXPECT_NEAR(row("rope", 16)["loss_std"].get<double>(), std::sqrt(0.02), 1e-12);
  EXPECT_NEAR(row("rope", 16)["loss_ci95"].get<double>(), 12.706205 * std::sqrt(0.02) / std::sqrt(2.0), 1e-6);
  EXPECT_TRUE(row("learned", 16)["loss_ci95"].is_null());  // one seed: no interval
  EXPECT_NEAR(row("rope", 32)["exact_match_mean"].get<double>(), 0.4, 1e-12);
  EXPECT_EQ(row("rope", 16)["n"], 2);
  EXPECT_EQ(row("learned", 16)["n"], 1);
  EXPECT_EQ(row("learned", 32)["status"], "n/a: learned table has 64 positions");
  EXPECT_TRUE(row("learned", 32)["loss_mean"].is_null());
  int not_run = 0;
  for (const auto& c : r["cells"]) not_run += c["status"] == "not run";
  EXPECT_EQ(not_run, 1);
  auto table = format_results_table(r);
  // learned (1.0, one seed) leads rope (0.8 +- 1.27 over two seeds) by less than rope's interval: no mark.
  EXPECT_EQ(table.find("*"), table.find("* = best")) << table;
  EXPECT_NE(table.find("0.800±"), std::string::npos) << table;
  EXPECT_NE(table.find("n/a"), std::string::npos) << table;
  auto csv = results_csv(r);
  EXPECT_NE(csv.find("\"rope\",\"rope\",\"\",16,33,2,\"ok\",0.3"), std::string::npos) << csv;
}

// Cells that failed in this compare (the failures map) are failed cells, whatever their summary says, and a
// group whose every cell failed has "failed" rows at every length, not "missing"; a variant fails by its own
// name or by its cell's.
TEST(Aggregate, FailuresOfThisCompareMarkCellsAndTheirGroupsRows) {
  TempDir dir;
  auto e = load_experiment(write_experiment(dir, R"({"model.pos_encoding.kind": ["rope", "learned"], "seed": [1, 2]})"));
  const std::string out = dir.sub("out");
  fake_cell(out + "/cells/kind=rope_seed=1", 0.2, 0.9, false);
  fake_cell(out + "/cells/kind=rope_seed=2", 0.4, 0.7, false);
  const std::map<std::string, std::string> failures = {{"kind=learned_seed=1", "validation loss is nan at step 0"},
                                                       {"kind=learned_seed=2", "out of memory"},
                                                       {"kind=rope_seed=2", "killed"}};
  json r = aggregate_results(e, out, failures);
  std::map<std::string, json> cells;
  for (const auto& c : r["cells"]) cells[c["name"]] = c;
  EXPECT_EQ(cells["kind=rope_seed=1"]["status"], "done");
  EXPECT_EQ(cells["kind=rope_seed=2"]["status"], "failed");  // its summary says done: this compare's failure wins
  EXPECT_EQ(cells["kind=rope_seed=2"]["error"], "killed");
  EXPECT_EQ(cells["kind=learned_seed=2"]["error"], "out of memory");
  int failed_rows = 0, rope_rows = 0;
  for (const auto& row : r["rows"]) {
    if (row["group"] == "learned") failed_rows += row["status"] == "failed";
    if (row["group"] == "rope") rope_rows += row["status"] == "ok" && row["n"] == 1;
  }
  EXPECT_EQ(failed_rows, 2) << r["rows"].dump();  // 16 and 32
  EXPECT_EQ(rope_rows, 2) << r["rows"].dump();    // one seed left
}

// Every cell failed: no eval.json to take the lengths from, yet each group keeps a "failed" row at each length
// the cells were to be evaluated at (results.csv a line for each, as docs/outputs.md says), and nothing is ranked.
TEST(Aggregate, EveryCellFailedStillGivesEachGroupItsFailedRows) {
  TempDir dir;
  dir.file("base.json", R"({"data": {"task": "copy", "max_len": 4}, "model": {"block_size": 16}})");
  auto e = load_experiment(dir.file("exp.json", R"({"name": "t", "base": "base.json", "set": {"eval.lengths": [8, 24]},
                                                     "grid": {"model.pos_encoding.kind": ["rope", "alibi"]}})"));
  const std::string out = dir.sub("out");
  const std::map<std::string, std::string> failures = {{"kind=rope", "No space left on device"}, {"kind=alibi", "killed"}};
  json r = aggregate_results(e, out, failures);
  EXPECT_EQ(r["lengths"], json({8, 24})) << r.dump();
  std::set<std::pair<std::string, int>> rows;
  for (const auto& row : r["rows"]) {
    EXPECT_EQ(row["status"], "failed") << row.dump();
    rows.insert({row["group"].get<std::string>(), row["length"].get<int>()});
  }
  EXPECT_EQ(rows, (std::set<std::pair<std::string, int>>{{"rope", 8}, {"rope", 24}, {"alibi", 8}, {"alibi", 24}}));
  const std::string csv = results_csv(r);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5) << csv;  // the header and four rows
}

// A cell file that is there but damaged is an error naming it, not a cell quietly left out of its row's mean.
TEST(Aggregate, ADamagedCellFileIsAnErrorNamingIt) {
  TempDir dir;
  auto e = load_experiment(write_experiment(dir, R"({"model.pos_encoding.kind": ["rope"], "seed": [1, 2]})"));
  const std::string out = dir.sub("out");
  const std::string one = out + "/cells/kind=rope_seed=1", two = out + "/cells/kind=rope_seed=2";
  fake_cell(one, 0.2, 0.9, false);
  fake_cell(two, 0.4, 0.7, false);
  ASSERT_NO_THROW(aggregate_results(e, out));
  const std::vector<std::pair<std::string, std::string>> damage = {
      {two + "/eval.json", "{\"broken"},
      {two + "/eval.json", R"({"train_length": 16})"},
      {two + "/eval.json", R"({"train_length": 16, "results": 3})"},
      {two + "/summary.json", "[1, 2"},
      {two + "/summary.json", R"({"status": "done", "params": 1000, "wall_s": 2.0})"}};
  for (const auto& [file, text] : damage) {
    fake_cell(two, 0.4, 0.7, false);
    write_file_atomic(file, text);
    try {
      aggregate_results(e, out);
      ADD_FAILURE() << "accepted " << file << ": " << text;
    } catch (const ConfigError& err) {
      EXPECT_NE(std::string(err.what()).find(file), std::string::npos) << err.what();
    }
  }
}

// A scenario's keys are named by results.json itself: the report cannot find them by splitting the
// scenario text, whose values may hold ", " (a file name).
TEST(Aggregate, ScenarioKeysAreNamedNotParsed) {
  TempDir dir;
  dir.file("a, b.txt", std::string(2000, 'x'));
  dir.file("c.txt", std::string(2000, 'y'));
  dir.file("text.json", R"({"data": {"kind": "text"}, "model": {"block_size": 16}, "eval": {"lengths": [16, 32]}})");
  auto e = load_experiment(dir.file("exp.json", R"({"name": "t", "base": "text.json", "grid": {"model.pos_encoding.kind":
      ["rope", "alibi"], "data.path": ["a, b.txt", "c.txt"], "train.learning_rate": [0.001, 0.002]}})"));
  const std::string out = dir.sub("out");
  for (const auto& c : e.cells) fake_cell(out + "/cells/" + c.name, 0.2, 0.9, false);
  json r = aggregate_results(e, out);
  EXPECT_EQ(r["scenario_keys"], json({"learning_rate", "path"})) << r["scenario_keys"].dump();
  bool comma = false;
  for (const auto& row : r["rows"]) comma = comma || row["scenario"].get<std::string>().find("a, b.txt") != std::string::npos;
  EXPECT_TRUE(comma) << "the scenario text holds the value as it is";
}

// Every config and experiment the project ships must load and validate (a typo there would only
// surface when a user runs it).
// N equal cells (one unit of one core's work each) on `jobs` cores, started as runner.cpp starts them
// (cells_at_once asked before each start), the cores shared evenly among the running cells (a cell runs at
// min(1, jobs / running) of a core). Returns when the last cell ends, and the most cells running at once.
static std::pair<double, int> simulate_grid(int N, int jobs, bool extra) {
  std::vector<double> left_work;  // of the running cells
  int next = 0, most = 0;
  double now = 0;
  while (next < N || !left_work.empty()) {
    while (next < N &&
           static_cast<int>(left_work.size()) < poslab::runner_parts::cells_at_once(jobs, static_cast<int>(left_work.size()), N - next, extra))
      left_work.push_back(1.0), ++next;
    most = std::max(most, static_cast<int>(left_work.size()));
    const double speed = std::min(1.0, static_cast<double>(jobs) / static_cast<double>(left_work.size()));
    const double first = *std::min_element(left_work.begin(), left_work.end());
    now += first / speed;
    std::vector<double> still;
    for (double w : left_work)
      if (w - first > 1e-12) still.push_back(w - first);
    left_work = still;
  }
  return {now, most};
}

TEST(CellsAtOnce, OneBeyondTheJobsOnlyWhereTheLastRoundWouldLeaveCoresIdle) {
  for (int jobs = 1; jobs <= 4; ++jobs)
    for (int running = 0; running <= jobs + 1; ++running)
      for (int left = 0; left <= 3 * jobs; ++left) {
        EXPECT_EQ(poslab::runner_parts::cells_at_once(jobs, running, left, /*extra=*/false), jobs);
        const int with = poslab::runner_parts::cells_at_once(jobs, running, left, /*extra=*/true);
        EXPECT_EQ(with, jobs > 1 && left > 0 && running + left == jobs + 1 ? jobs + 1 : jobs) << jobs << " " << running << " " << left;
      }
  // Whole grids: in rounds of `jobs` a grid ends after ceil(N / jobs) cells' time; with the last jobs + 1 together
  // where N leaves one over (N mod jobs == 1), after N / jobs, every core busy to the end; never later, and never
  // more than jobs + 1 at once.
  for (int jobs = 1; jobs <= 4; ++jobs)
    for (int N = 1; N <= 13; ++N) {
      const auto [without, most_without] = simulate_grid(N, jobs, false);
      const auto [with, most_with] = simulate_grid(N, jobs, true);
      const double rounds = std::ceil(static_cast<double>(N) / jobs);
      EXPECT_NEAR(without, rounds, 1e-9) << N << " cells, " << jobs << " jobs";
      EXPECT_EQ(most_without, std::min(N, jobs));
      const bool one_over = jobs > 1 && N > jobs && N % jobs == 1;  // one core: nothing idle to give
      EXPECT_NEAR(with, one_over ? static_cast<double>(N) / jobs : rounds, 1e-9) << N << " cells, " << jobs << " jobs";
      EXPECT_EQ(most_with, one_over ? jobs + 1 : std::min(N, jobs)) << N << " cells, " << jobs << " jobs";
    }
}

TEST(ShippedConfigs, AllLoadAndValidate) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(__FILE__).parent_path().parent_path() / "configs";
  const auto cwd = fs::current_path();
  fs::current_path(root.parent_path());  // data paths resolve against the repository, like a user's shell
  int configs = 0, experiments = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.path().extension() != ".json") continue;
    const auto rel = fs::relative(entry.path(), root.parent_path()).string();
    if (rel.find("experiments/") != std::string::npos) {
      auto e = load_experiment(rel);
      for (const auto& cell : e.cells) EXPECT_TRUE(cell.error.empty()) << rel << " " << cell.name << ": " << cell.error;
      ++experiments;
    } else {
      // configs/examples/ name the user's own data directory with --set data.dir=...
      const bool example = rel.find("examples/") != std::string::npos;
      Config c = load_config(rel, example ? std::vector<std::string>{"data.dir=somewhere"} : std::vector<std::string>{});
      if (example) EXPECT_THROW(load_config(rel), ConfigError) << rel << " should ask for data.dir";
      if (c.data.kind == "text") EXPECT_TRUE(fs::exists(c.data.path)) << rel << ": " << c.data.path;
      ++configs;
    }
  }
  fs::current_path(cwd);
  EXPECT_GE(configs, 15);  // base, 7 encodings, 8 tasks, bench
  EXPECT_GE(experiments, 3);
}
