// What a report may claim from an experiment's rows: 95% intervals over seeds, which value is
// best by more than its noise, a mean-reciprocal-rank ranking (Kazemnejad et al. 2023), and the
// "What this shows" paragraph written from the numbers. Pure functions of results.json content.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace poslab {

// Two-sided 95% Student t quantile for `df` degrees of freedom (df >= 1), computed, not tabled:
// 12.706 at df = 1, 4.303 at 2, 2.040 at 31, toward 1.960.
double t95(int df);

// Mean, sample standard deviation and 95% half-width of `values`; std and half-width are null
// with fewer than two values (one seed gives no noise estimate).
nlohmann::json summarize_values(const std::vector<double>& values);

// Loss-like metrics are better low; accuracies and exact match are better high.
bool higher_is_better(const std::string& metric);

// With one seed, a best value must lead the runner-up by more than this to be marked.
constexpr double kSingleSeedResolution = 0.01;
// "Stays flat" in the summary: within this many nats (loss) or this share (rates) of its
// training-length value at the longest length.
constexpr double kFlatLossMargin = 0.10;
constexpr double kFlatRateMargin = 0.10;

// Sets rows[i]["best"] for `metric` in each column (one length within one scenario): true only for
// the single best value that beats every other by more than the noise (both 95% half-widths with
// 2+ seeds, kSingleSeedResolution with one). Ties, all-equal columns and n/a cells are never best.
void mark_best(nlohmann::json& rows, const std::string& metric, const std::string& item_key);

// Ranks the items (values of `item_key`, normally the encoding) in every scenario (one length past
// the training length, per combination of the other grid keys); n/a and missing rank last.
// Returns {"item_key", "metric", "scenarios": N, "settings": S (combinations of the other grid keys; N is S
// times the lengths where every setting has every length), "lengths": [...], "items": [{"name", "mrr", "ranks"}]},
// items sorted by MRR, best first.
nlohmann::json mrr_ranking(const nlohmann::json& results, const std::string& metric, const std::string& item_key);

// mrr_ranking by `metric`, unless that metric has one value for every encoding past the training
// length (typically exact match 0 everywhere at toy budgets): then by loss, with a "fallback" note.
nlohmann::json ranking_with_fallback(const nlohmann::json& results, const std::string& metric, const std::string& item_key);

// The "What this shows" paragraph, from the rows alone.
std::string what_this_shows(const nlohmann::json& results, const std::string& metric, const nlohmann::json& ranking);

// A multiple of the training length as the reports write it: "8x", "1.5x".
std::string times(double ratio);

}  // namespace poslab
