// The report's claims on hand-made results: intervals over seeds, best marks only beyond noise
// (ties, one seed, all zeros, n/a), the MRR ranking and the "What this shows" text. Expected values
// come from the definitions (t table, reciprocal ranks by hand), not from the code under test.
#include <algorithm>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "experiment/experiment.h"
#include "experiment/report_stats.h"
#include "test_util.h"

using namespace poslab;
using nlohmann::json;

// One row of results.json: `values` are the per-seed numbers of `metric` (empty = n/a).
static json row(const std::string& item, int length, const std::vector<double>& values, const std::string& metric = "loss",
                const std::string& scenario = "") {
  json s = summarize_values(values);
  json r = {{"group", item}, {"item", item}, {"scenario", scenario}, {"length", length}, {"n", s["n"]},
            {"status", values.empty() ? "n/a: learned table has 64 positions" : "ok"}};
  r[metric + "_mean"] = s["mean"];
  r[metric + "_std"] = s["std"];
  r[metric + "_ci95"] = s["ci95"];
  return r;
}

static bool best(const json& rows, const std::string& item, int length) {
  for (const auto& r : rows)
    if (r["item"] == item && r["length"] == length) return r["best"].get<bool>();
  ADD_FAILURE() << "no row " << item << " " << length;
  return false;
}

TEST(ReportStats, IntervalIsStudentTOverSeeds) {
  // Three seeds 1, 2, 3: mean 2, sample std 1, half-width t(0.975, 2) * 1 / sqrt(3) = 4.303 / 1.732.
  json s = summarize_values({1.0, 2.0, 3.0});
  EXPECT_DOUBLE_EQ(s["mean"].get<double>(), 2.0);
  EXPECT_NEAR(s["std"].get<double>(), 1.0, 1e-12);
  EXPECT_NEAR(s["ci95"].get<double>(), 4.302653 / std::sqrt(3.0), 1e-6);
  EXPECT_EQ(s["n"], 3);
  // Two seeds: t = 12.706, std of {0, 1} = sqrt(0.5).
  EXPECT_NEAR(summarize_values({0.0, 1.0})["ci95"].get<double>(), 12.706205 * std::sqrt(0.5) / std::sqrt(2.0), 1e-6);
  // One seed: no noise estimate, so neither a std nor an interval.
  json one = summarize_values({0.7});
  EXPECT_TRUE(one["std"].is_null());
  EXPECT_TRUE(one["ci95"].is_null());
  EXPECT_EQ(one["n"], 1);
}

TEST(ReportStats, TQuantileHoldsTwoAndAHalfPercentInTheTail) {
  // The published table (three decimals), including the degrees of freedom past 30 that a
  // coarse table rounds toward the next tabled row (31 is 2.040, not 40's 2.021).
  const std::vector<std::pair<int, double>> table = {{1, 12.706}, {2, 4.303}, {3, 3.182}, {4, 2.776}, {9, 2.262},
                                                     {30, 2.042}, {31, 2.040}, {40, 2.021}, {60, 2.000}, {120, 1.980}};
  for (const auto& [df, t] : table) EXPECT_NEAR(t95(df), t, 5.1e-4) << "df " << df;
  EXPECT_NEAR(t95(100000), 1.959964, 1e-4);
  EXPECT_TRUE(std::isnan(t95(0)));
  // Property: the density of Student's t, integrated by Simpson's rule from 0 to t95(df), holds
  // 47.5% of the mass (the formula's own definition, independent of the incomplete beta used).
  for (int df : {1, 2, 3, 5, 7, 13, 31, 47, 200}) {
    const double nu = df, q = t95(df);
    const double norm = std::exp(std::lgamma((nu + 1) / 2) - std::lgamma(nu / 2)) / std::sqrt(nu * M_PI);
    const auto density = [&](double t) { return norm * std::pow(1 + t * t / nu, -(nu + 1) / 2); };
    const int n = 20000;
    const double h = q / n;
    double sum = density(0) + density(q);
    for (int i = 1; i < n; ++i) sum += (i % 2 ? 4 : 2) * density(i * h);
    EXPECT_NEAR(sum * h / 3, 0.475, 1e-9) << "df " << df;
    EXPECT_GT(t95(df), t95(df + 1));  // heavier tails with fewer seeds
  }
}

TEST(ReportStats, BestNeedsToBeatTheNoise) {
  // One seed: a lead of 0.5 is marked, a lead of 0.005 (below the 0.01 resolution) is not.
  json rows = {row("alibi", 128, {1.8}), row("rope", 128, {2.3}), row("sin", 128, {3.0}),
               row("alibi", 64, {1.800}), row("rope", 64, {1.795}), row("learned", 256, {}), row("alibi", 256, {1.9})};
  mark_best(rows, "loss", "model.pos_encoding.kind");
  EXPECT_TRUE(best(rows, "alibi", 128));
  EXPECT_FALSE(best(rows, "rope", 128));
  EXPECT_FALSE(best(rows, "rope", 64));   // ahead by less than the noise
  EXPECT_FALSE(best(rows, "alibi", 64));
  EXPECT_FALSE(best(rows, "alibi", 256));  // alone against an n/a cell: nothing to beat
  EXPECT_FALSE(best(rows, "learned", 256));
}

TEST(ReportStats, TiesAndAllZerosAreNeverBest) {
  json rows = {row("a", 32, {0.0}, "exact_match"), row("b", 32, {0.0}, "exact_match"), row("c", 32, {0.0}, "exact_match"),
               row("a", 16, {0.9}, "exact_match"), row("b", 16, {0.9}, "exact_match")};
  mark_best(rows, "exact_match", "k");
  for (const auto& r : rows) EXPECT_FALSE(r["best"].get<bool>()) << r.dump();
}

TEST(ReportStats, SeedsMarkOnlyWhenIntervalsSeparate) {
  // Means 0.50 vs 0.40 with wide seed noise: intervals overlap, no mark. Tight seeds: marked.
  json wide = {row("a", 32, {0.2, 0.8}, "exact_match"), row("b", 32, {0.3, 0.5}, "exact_match")};
  mark_best(wide, "exact_match", "k");
  EXPECT_FALSE(best(wide, "a", 32));
  json tight = {row("a", 32, {0.50, 0.51, 0.49}, "exact_match"), row("b", 32, {0.40, 0.41, 0.39}, "exact_match")};
  mark_best(tight, "exact_match", "k");
  EXPECT_TRUE(best(tight, "a", 32));  // higher is better for exact match
  EXPECT_FALSE(best(tight, "b", 32));
}

TEST(ReportStats, ASeedlessRowAmongIntervalsIsNeverBestNorBeaten) {
  // An interrupted grid: alibi has one seed of three so far, rope its three. alibi's single value leads by
  // far more than rope's interval, yet its own spread is unmeasured: no mark either way. With its seeds in, the
  // same lead (and tight seeds) is marked.
  json rows = {row("alibi", 128, {3.382}), row("rope", 128, {3.400, 3.395, 3.405}),
               row("alibi", 64, {5.0}), row("rope", 64, {2.000, 2.001, 1.999})};
  mark_best(rows, "loss", "k");
  for (const auto& r : rows) EXPECT_FALSE(r["best"].get<bool>()) << r.dump();
  json done = {row("alibi", 128, {3.382, 3.381, 3.383}), row("rope", 128, {3.400, 3.395, 3.405})};
  mark_best(done, "loss", "k");
  EXPECT_TRUE(best(done, "alibi", 128));
}

TEST(ReportStats, MeanReciprocalRankOverLengthsPastTraining) {
  json results = {{"train_length", 64}, {"length_unit", "tokens"},
                  {"rows", {row("alibi", 64, {2.0}), row("rope", 64, {1.9}), row("learned", 64, {1.8}),
                            row("alibi", 128, {2.0}), row("rope", 128, {2.5}), row("learned", 128, {}),
                            row("alibi", 256, {2.6}), row("rope", 256, {2.6}), row("learned", 256, {})}}};
  json rk = mrr_ranking(results, "loss", "model.pos_encoding.kind");
  EXPECT_EQ(rk["scenarios"], 2);  // 128 and 256; 64 is the training length
  EXPECT_EQ(rk["settings"], 1);
  // alibi ranks 1, 1 (tie at 256 shares rank 1) -> 1.0; rope 2, 1 -> 0.75; learned n/a -> last (3), 3 -> 1/3.
  ASSERT_EQ(rk["items"].size(), 3u);
  EXPECT_EQ(rk["items"][0]["name"], "alibi");
  EXPECT_NEAR(rk["items"][0]["mrr"].get<double>(), 1.0, 1e-12);
  EXPECT_EQ(rk["items"][1]["name"], "rope");
  EXPECT_NEAR(rk["items"][1]["mrr"].get<double>(), 0.75, 1e-12);
  EXPECT_NEAR(rk["items"][2]["mrr"].get<double>(), 1.0 / 3.0, 1e-12);
}

TEST(ReportStats, MeanReciprocalRankLeavesOutALengthNoItemHasANumberAt) {
  // 300000 tokens, past the validation split: n/a for every encoding. Ranked, it would give both a shared last
  // place (1/2 each), and alibi's mean would fall from 1 to 3/4 for a length no encoding reached.
  json results = {{"train_length", 64}, {"length_unit", "tokens"},
                  {"rows", {row("alibi", 64, {2.0}), row("rope", 64, {1.9}), row("alibi", 128, {2.0}),
                            row("rope", 128, {2.5}), row("alibi", 300000, {}), row("rope", 300000, {})}}};
  json rk = mrr_ranking(results, "loss", "model.pos_encoding.kind");
  EXPECT_EQ(rk["lengths"], json({128}));
  EXPECT_EQ(rk["scenarios"], 1);
  ASSERT_EQ(rk["items"].size(), 2u);
  EXPECT_EQ(rk["items"][0]["name"], "alibi");
  EXPECT_NEAR(rk["items"][0]["mrr"].get<double>(), 1.0, 1e-12);
  EXPECT_NEAR(rk["items"][1]["mrr"].get<double>(), 0.5, 1e-12);
  // With no number past the training length at all, the ranking is over every length that has one: 64 alone,
  // where rope (1.9) leads alibi (2.0).
  json far = {{"train_length", 64}, {"length_unit", "tokens"},
              {"rows", {row("alibi", 64, {2.0}), row("rope", 64, {1.9}), row("alibi", 300000, {}), row("rope", 300000, {})}}};
  rk = mrr_ranking(far, "loss", "model.pos_encoding.kind");
  EXPECT_EQ(rk["lengths"], json({64}));
  EXPECT_EQ(rk["items"][0]["name"], "rope");
  EXPECT_NEAR(rk["items"][0]["mrr"].get<double>(), 1.0, 1e-12);
  EXPECT_NEAR(rk["items"][1]["mrr"].get<double>(), 0.5, 1e-12);
}

// Eval lengths that leave out the training length (8 and 300 tokens of a model trained at 16): the change is
// measured from 8, the longest length within it, and said so; from the shortest where none is within it.
TEST(ReportStats, WhatThisShowsMeasuresFromAnEvaluatedLengthWhereTheTrainingLengthIsNot) {
  json results = {{"train_length", 16}, {"length_unit", "tokens"},
                  {"rows", {row("rope", 8, {2.00}), row("alibi", 8, {2.10}), row("rope", 300, {2.60}), row("alibi", 300, {2.12})}}};
  json rk = mrr_ranking(results, "loss", "k");
  const std::string text = what_this_shows(results, "loss", rk);
  EXPECT_NE(text.find("At 18.8x the training length (300 vs 16 tokens; measured from 8 tokens, the longest length "
                      "within the training length evaluated), "), std::string::npos) << text;
  EXPECT_NE(text.find("alibi (+0.02 to 2.12) stays within 0.10 nats of its loss at 8 tokens"), std::string::npos) << text;
  EXPECT_NE(text.find("rope (+0.60 to 2.60) rises by more"), std::string::npos) << text;
  EXPECT_EQ(text.find(", ."), std::string::npos) << text;
  EXPECT_EQ(text.find("No value at both lengths"), std::string::npos) << text;
  for (auto& r : results["rows"]) r["length"] = r["length"].get<int>() == 8 ? 32 : r["length"].get<int>();
  const std::string above = what_this_shows(results, "loss", mrr_ranking(results, "loss", "k"));
  EXPECT_NE(above.find("measured from 32 tokens, the shortest length evaluated), "), std::string::npos) << above;
  EXPECT_NE(above.find("of its loss at 32 tokens"), std::string::npos) << above;
}

TEST(ReportStats, MeanReciprocalRankAcrossTasks) {
  // Two tasks x one length past training: a wins copy, b wins reverse -> both (1 + 1/2) / 2.
  json results = {{"train_length", 8},
                  {"rows", {row("a", 16, {0.9}, "exact_match", "task=copy"), row("b", 16, {0.1}, "exact_match", "task=copy"),
                            row("a", 16, {0.2}, "exact_match", "task=reverse"),
                            row("b", 16, {0.6}, "exact_match", "task=reverse")}}};
  json rk = mrr_ranking(results, "exact_match", "k");
  EXPECT_EQ(rk["scenarios"], 2);
  EXPECT_EQ(rk["settings"], 2);  // two tasks at one length
  for (const auto& it : rk["items"]) EXPECT_NEAR(it["mrr"].get<double>(), 0.75, 1e-12) << it.dump();
  // Best is marked within each scenario, so a column holds one per task; the text says so.
  mark_best(results["rows"], "exact_match", "k");
  std::vector<std::string> marked;
  for (const auto& r : results["rows"])
    if (r.value("best", false)) marked.push_back(r["item"].get<std::string>() + "@" + r["scenario"].get<std::string>());
  EXPECT_EQ(marked, (std::vector<std::string>{"a@task=copy", "b@task=reverse"}));
  results["length_unit"] = "items";
  const std::string text = what_this_shows(results, "exact_match", rk);
  EXPECT_NE(text.find("at 16 items, in each scenario: "), std::string::npos) << text;
}

TEST(ReportStats, WhatThisShowsIsWrittenFromTheNumbers) {
  json results = {{"train_length", 64}, {"length_unit", "tokens"},
                  {"rows", {row("alibi", 64, {1.75}), row("sinusoidal", 64, {1.80}), row("learned", 64, {1.79}),
                            row("alibi", 512, {1.78}), row("sinusoidal", 512, {3.61}), row("learned", 512, {})}}};
  mark_best(results["rows"], "loss", "k");
  json rk = mrr_ranking(results, "loss", "k");
  const std::string text = what_this_shows(results, "loss", rk);
  EXPECT_NE(text.find("At 8x the training length (512 vs 64 tokens)"), std::string::npos) << text;
  EXPECT_NE(text.find("alibi (+0.03 to 1.78) stays within 0.10 nats"), std::string::npos) << text;
  EXPECT_NE(text.find("sinusoidal (+1.81 to 3.61) rises by more"), std::string::npos) << text;
  EXPECT_NE(text.find("Not applicable: learned past 64 tokens"), std::string::npos) << text;
  EXPECT_NE(text.find("Best loss at 512 tokens: alibi (1.780)"), std::string::npos) << text;
  EXPECT_NE(text.find("One seed"), std::string::npos) << text;
  // Change the numbers and the text follows: now sinusoidal is the flat one.
  results["rows"][4]["loss_mean"] = 1.85;
  results["rows"][3]["loss_mean"] = 2.75;
  const std::string flipped = what_this_shows(results, "loss", rk);
  EXPECT_NE(flipped.find("sinusoidal (+0.05 to 1.85) stays within"), std::string::npos) << flipped;
  EXPECT_NE(flipped.find("alibi (+1.00 to 2.75) rises by more"), std::string::npos) << flipped;
  // A change that rounds to zero keeps its direction (not "0.00 to 1.75", which reads as a range); none is "±0.00".
  for (auto [v, want] : std::vector<std::pair<double, std::string>>{
           {1.7499, "alibi (-0.00 to 1.75)"}, {1.7501, "alibi (+0.00 to 1.75)"}, {1.75, "alibi (\u00b10.00 to 1.75)"}}) {
    results["rows"][3]["loss_mean"] = v;
    const std::string unmoved = what_this_shows(results, "loss", rk);
    EXPECT_NE(unmoved.find(want), std::string::npos) << want << " in: " << unmoved;
  }
  // Better past the training length by more than the margin is said as such, not as "within" it.
  results["rows"][3]["loss_mean"] = 1.50;
  const std::string better = what_this_shows(results, "loss", rk);
  EXPECT_EQ(better.find("alibi (-0.25 to 1.50) stays within"), std::string::npos) << better;
  EXPECT_NE(better.find("alibi (-0.25 to 1.50) falls by more than 0.10 nats, better past the training length than at it"),
            std::string::npos)
      << better;
}

TEST(ReportStats, AllZeroExactMatchSaysSo) {
  json results = {{"train_length", 8}, {"length_unit", "items"},
                  {"rows", {row("a", 8, {0.9}, "exact_match"), row("b", 8, {1.0}, "exact_match"),
                            row("a", 32, {0.0}, "exact_match"), row("b", 32, {0.0}, "exact_match")}}};
  const std::string text = what_this_shows(results, "exact_match", json());
  EXPECT_NE(text.find("no configuration gets a single example right past the training length"), std::string::npos) << text;
}

// The main job: the experiment the README's first command runs compares exactly the encodings the
// README lists, on text, past the training length.
TEST(MainJob, ConfigLoadsAndComparesTheNamedEncodings) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(__FILE__).parent_path().parent_path();
  const auto cwd = fs::current_path();
  fs::current_path(root);
  auto e = load_experiment("configs/experiments/quick.json");
  fs::current_path(cwd);
  std::vector<std::string> kinds;
  for (const auto& c : e.cells) {
    EXPECT_TRUE(c.error.empty()) << c.name << ": " << c.error;
    const std::string kind = c.config["model"]["pos_encoding"]["kind"];
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);  // once per seed
    EXPECT_EQ(c.config["data"]["kind"], "text");
    const auto& lengths = c.config["eval"]["lengths"];
    ASSERT_FALSE(lengths.empty());
    EXPECT_EQ(lengths.front().get<int>(), c.config["model"]["block_size"].get<int>());
    EXPECT_EQ(lengths.back().get<int>(), 8 * c.config["model"]["block_size"].get<int>());  // 1x to 8x
  }
  // The README's main-job sentence names these, in this order.
  std::ifstream readme(root / "README.md");
  std::string text((std::istreambuf_iterator<char>(readme)), std::istreambuf_iterator<char>());
  const auto at = text.find("main job compares");
  ASSERT_NE(at, std::string::npos) << "README lost its main-job sentence";
  const std::string sentence = text.substr(at, text.find('\n', at) - at);
  size_t last = 0;
  for (const auto& k : kinds) {
    const auto p = sentence.find("`" + k + "`");
    EXPECT_NE(p, std::string::npos) << "README main-job sentence does not name " << k << ": " << sentence;
    if (p != std::string::npos) EXPECT_GE(p, last), last = p;
  }
}

TEST(ReportStats, RankingFallsBackToLossWhenExactMatchCannotTell) {
  // Exact match 0 for everyone past training: ranking by it would tie everyone; loss separates a < b.
  auto both = [](const std::string& item, int L, double em, double loss) {
    json r = row(item, L, {em}, "exact_match");
    json l = summarize_values({loss});
    r["loss_mean"] = l["mean"], r["loss_ci95"] = l["ci95"];
    return r;
  };
  json results = {{"train_length", 8},
                  {"rows", {both("a", 8, 0.9, 0.1), both("b", 8, 1.0, 0.0), both("a", 16, 0.0, 1.5), both("b", 16, 0.0, 7.0)}}};
  json rk = ranking_with_fallback(results, "exact_match", "k");
  EXPECT_EQ(rk["metric"], "loss");
  ASSERT_TRUE(rk.contains("fallback"));
  EXPECT_EQ(rk["items"][0]["name"], "a");
  EXPECT_NEAR(rk["items"][1]["mrr"].get<double>(), 0.5, 1e-12);
  // When exact match does separate them past training, it is kept.
  results["rows"][2]["exact_match_mean"] = 0.3;
  EXPECT_EQ(ranking_with_fallback(results, "exact_match", "k")["metric"], "exact_match");
}

// An item no cell finished (failed, or not run yet) measured nothing: it is not ranked, where n/a (a length its
// encoding cannot reach) ranks last; a scenario where every cell failed ranks nobody.
TEST(ReportStats, ItemsThatMeasuredNothingAreNotRanked) {
  auto failed = [](const std::string& item, int L, const std::string& status, const std::string& scenario = "") {
    json r = row(item, L, {}, "loss", scenario);
    r["status"] = status;
    return r;
  };
  json results = {{"train_length", 64}, {"length_unit", "tokens"},
                  {"rows", {row("rope", 64, {1.9}), row("rope", 128, {2.5}), row("learned", 64, {1.8}), row("learned", 128, {}),
                            failed("alibi", 64, "failed"), failed("alibi", 128, "failed"),
                            failed("kerple", 64, "missing"), failed("kerple", 128, "missing")}}};
  json rk = mrr_ranking(results, "loss", "model.pos_encoding.kind");
  ASSERT_EQ(rk["items"].size(), 2u) << rk.dump();
  EXPECT_EQ(rk["items"][0]["name"], "rope");
  EXPECT_NEAR(rk["items"][0]["mrr"].get<double>(), 1.0, 1e-12);  // rank 1 of the two measured at 128
  EXPECT_EQ(rk["items"][1]["name"], "learned");
  EXPECT_NEAR(rk["items"][1]["mrr"].get<double>(), 0.5, 1e-12);  // n/a: last of two, not of four
  // Two scenarios, one where every cell failed: only the other is ranked.
  json two = {{"train_length", 64}, {"length_unit", "tokens"},
              {"rows", {row("rope", 128, {2.5}, "loss", "lr=1"), row("alibi", 128, {2.0}, "loss", "lr=1"),
                        failed("rope", 128, "failed", "lr=2"), failed("alibi", 128, "failed", "lr=2")}}};
  rk = mrr_ranking(two, "loss", "model.pos_encoding.kind");
  EXPECT_EQ(rk["scenarios"], 1) << rk.dump();
  ASSERT_EQ(rk["items"].size(), 2u);
  EXPECT_EQ(rk["items"][0]["name"], "alibi");
  EXPECT_NEAR(rk["items"][0]["mrr"].get<double>(), 1.0, 1e-12);
  EXPECT_NEAR(rk["items"][1]["mrr"].get<double>(), 0.5, 1e-12);
}

// The console's ranking line says what a scenario is, and when the ranking is by loss instead of the metric.
TEST(ReportStats, ConsoleRankingLineSaysItsScenariosAndFallback) {
  auto both = [](const std::string& item, int L, double em, double loss, const std::string& scenario) {
    json r = row(item, L, {em}, "exact_match", scenario);
    json l = summarize_values({loss});
    r["loss_mean"] = l["mean"], r["loss_ci95"] = l["ci95"], r["params"] = 1000, r["tokens_per_s_mean"] = 5000;
    return r;
  };
  json rows = json::array();
  for (const std::string task : {"task=copy", "task=reverse"})
    for (int L : {8, 16, 32})
      rows.push_back(both("a", L, L == 8 ? 0.9 : 0.0, L / 8.0, task)), rows.push_back(both("b", L, L == 8 ? 1.0 : 0.0, L / 4.0, task));
  json results = {{"experiment", "t"}, {"metric", "exact_match"}, {"seeds", 1}, {"lengths", {8, 16, 32}},
                  {"length_unit", "items"}, {"train_length", 8}, {"group_keys", {"k"}}, {"rows", rows},
                  {"cells", json::array()}};
  results["ranking"] = ranking_with_fallback(results, "exact_match", "k");
  const std::string table = format_results_table(results);
  EXPECT_NE(table.find("ranking by mean reciprocal rank of loss over 4 scenarios (2 settings x lengths 16 32): a 1.00 b 0.50\n"
                       "(exact match is 0.000 for every configuration past the training length, so the ranking is by loss)"),
            std::string::npos)
      << table;
  // Exact match that separates them: ranked by it, no note.
  results["rows"][2]["exact_match_mean"] = 0.5;  // a at 16, copy
  results["ranking"] = ranking_with_fallback(results, "exact_match", "k");
  const std::string kept = format_results_table(results);
  EXPECT_NE(kept.find("ranking by mean reciprocal rank over 4 scenarios (2 settings x lengths 16 32):"), std::string::npos) << kept;
  EXPECT_EQ(kept.find("so the ranking is by loss"), std::string::npos) << kept;
  EXPECT_NE(what_this_shows(results, "exact_match", results["ranking"]).find("Mean reciprocal rank over 4 scenarios: "), std::string::npos);
  // One task only: nothing else varied, so the ranked scenarios are the lengths and are called so.
  json one = results;
  one["rows"] = json::array();
  for (const auto& r : results["rows"])
    if (r["scenario"] == "task=copy") one["rows"].push_back(r);
  for (auto& r : one["rows"]) r["scenario"] = "";
  one["ranking"] = ranking_with_fallback(one, "exact_match", "k");
  const std::string single = format_results_table(one);
  EXPECT_NE(single.find("ranking by mean reciprocal rank over lengths 16 32: "), std::string::npos) << single;
  EXPECT_EQ(single.find("scenario"), std::string::npos) << single;
  EXPECT_NE(what_this_shows(one, "exact_match", one["ranking"]).find("Mean reciprocal rank over 2 lengths: "), std::string::npos)
      << what_this_shows(one, "exact_match", one["ranking"]);
}

// A difference the tables print as none (they show 3 decimals) is a tie in the ranking too.
TEST(ReportStats, DifferencesBelowThePrintedPrecisionTie) {
  json results = {{"train_length", 64}, {"length_unit", "tokens"},
                  {"rows", {row("alibi", 128, {1.941000}), row("kerple", 128, {1.941004}), row("rope", 128, {2.5})}}};
  json rk = mrr_ranking(results, "loss", "model.pos_encoding.kind");
  ASSERT_EQ(rk["items"].size(), 3u);
  // alibi and kerple share rank 1 (1/1 each); rope is third (competition ranking "113").
  for (const auto& it : rk["items"]) {
    const double want = it["name"] == "rope" ? 1.0 / 3.0 : 1.0;
    EXPECT_NEAR(it["mrr"].get<double>(), want, 1e-12) << it["name"];
  }
}

// The console table's columns line up whatever the length of a group's label.
TEST(ReportStats, ConsoleTableAlignsLongLabels) {
  json rows = {row("alibi", 64, {1.9}), row("alibi", 128, {2.0}),
               row("rope, eval=dynamic_ntk_with_a_long_name", 64, {1.8}),
               row("rope, eval=dynamic_ntk_with_a_long_name", 128, {2.6})};
  for (auto& r : rows) r["params"] = 1000, r["tokens_per_s_mean"] = 5000;
  json results = {{"experiment", "t"}, {"metric", "loss"}, {"seeds", 1}, {"lengths", {64, 128}},
                  {"length_unit", "tokens"}, {"train_length", 64}, {"group_keys", {"model.pos_encoding.kind"}},
                  {"rows", rows}, {"cells", json::array()}};
  std::istringstream table(format_results_table(results));
  std::string line;
  std::getline(table, line);  // the title
  std::vector<size_t> ends;   // where the "128" column ends on the header and each row
  while (std::getline(table, line) && !line.empty() && line.rfind("ranking", 0) != 0 && line.rfind("What", 0) != 0) {
    const auto at = line.find(line.rfind("encoding", 0) == 0 ? "128" : (line.rfind("alibi", 0) == 0 ? "2.000" : "2.600"));
    ASSERT_NE(at, std::string::npos) << line;
    ends.push_back(at + (line.rfind("encoding", 0) == 0 ? 3 : 6));  // a value carries its best mark (* or space)
  }
  ASSERT_EQ(ends.size(), 3u);
  EXPECT_EQ(ends[0], ends[1]);
  EXPECT_EQ(ends[0], ends[2]);
}

// Multiples of the training length: whole ones bare, others to one decimal (1.5x was written "2x").
TEST(ReportStats, MultiplesOfTheTrainingLength) {
  EXPECT_EQ(times(8.0), "8x");
  EXPECT_EQ(times(96.0 / 64.0), "1.5x");
  EXPECT_EQ(times(72.0 / 64.0), "1.1x");
  EXPECT_EQ(times(1.0), "1x");
}
