// Report statistics: intervals over seeds, noise-aware best marks, MRR ranking and the summary
// paragraph. Rows carry "item" (the compared thing, e.g. the encoding), "scenario" (the other grid
// values, "" when there are none), "length", "status" and <metric>_mean / _ci95 / n.
#include "experiment/report_stats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

namespace poslab {
using nlohmann::json;

namespace {
// Regularized incomplete beta I_x(a, b) by its continued fraction (modified Lentz; Press et al.,
// Numerical Recipes 6.4), using the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) where it converges slowly.
double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  if (x > (a + 1) / (a + b + 2)) return 1 - incomplete_beta(b, a, 1 - x);
  const double log_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  constexpr double kTiny = 1e-300;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  d = 1 / (std::fabs(d) < kTiny ? kTiny : d);
  double f = d;
  for (int m = 1; m <= 1000; ++m) {
    for (int half = 0; half < 2; ++half) {  // the even then the odd term of the fraction
      const double num = half == 0 ? m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
                                   : -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
      d = 1 + num * d;
      d = 1 / (std::fabs(d) < kTiny ? kTiny : d);
      c = 1 + num / c;
      if (std::fabs(c) < kTiny) c = kTiny;
      f *= c * d;
      if (half == 1 && std::fabs(c * d - 1) < 1e-15) return std::exp(log_front) * f / a;
    }
  }
  return std::exp(log_front) * f / a;
}
}  // namespace

double t95(int df) {
  // The two-sided 95% quantile of Student's t: the t > 0 whose upper tail P(T > t) =
  // I_{df/(df+t^2)}(df/2, 1/2) / 2 is 0.025, found by bisection (the tail falls as t grows).
  if (df < 1) return NAN;
  const double nu = df;
  const auto upper_tail = [nu](double t) { return 0.5 * incomplete_beta(nu / 2, 0.5, nu / (nu + t * t)); };
  double lo = 0, hi = 16;  // df = 1 gives 12.706, the largest
  for (int i = 0; i < 200 && hi - lo > 1e-13; ++i) {
    const double mid = 0.5 * (lo + hi);
    (upper_tail(mid) > 0.025 ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

json summarize_values(const std::vector<double>& values) {
  const auto n = static_cast<int>(values.size());
  if (n == 0) return {{"mean", nullptr}, {"std", nullptr}, {"ci95", nullptr}, {"n", 0}};
  double mean = 0;
  for (double v : values) mean += v;
  mean /= n;
  if (n < 2) return {{"mean", mean}, {"std", nullptr}, {"ci95", nullptr}, {"n", 1}};
  double ss = 0;
  for (double v : values) ss += (v - mean) * (v - mean);
  const double sd = std::sqrt(ss / (n - 1));  // sample std: the interval's estimate of seed noise
  return {{"mean", mean}, {"std", sd}, {"ci95", t95(n - 1) * sd / std::sqrt(static_cast<double>(n))}, {"n", n}};
}

bool higher_is_better(const std::string& metric) { return metric != "loss" && metric != "ppl"; }

namespace {

double value_of(const json& row, const std::string& metric) {
  const auto& v = row[metric + "_mean"];
  return v.is_number() ? v.get<double>() : NAN;
}
double noise_of(const json& row, const std::string& metric) {
  const auto& v = row.value(metric + "_ci95", json(nullptr));
  return v.is_number() ? v.get<double>() : kSingleSeedResolution;
}
std::string fmt(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}
// "+0.09", "-0.01"; a change that rounds to zero keeps its direction ("+0.00", "-0.00"; a bare "0.00" beside
// "to 1.75" reads as a range), and none at all is "±0.00".
std::string signed_fmt(double v, int digits) {
  const std::string zero = fmt(0.0, digits);
  if (v == 0) return "\u00b1" + zero;
  if (fmt(std::abs(v), digits) == zero) return (v > 0 ? "+" : "-") + zero;
  return (v > 0 ? "+" : "") + fmt(v, digits);
}
std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i == 0 ? "" : i + 1 == parts.size() ? (parts.size() > 2 ? ", and " : " and ") : ", ") + parts[i];
  return out;
}
std::string label(const json& row) {
  const std::string scenario = row.value("scenario", "");
  return row["item"].get<std::string>() + (scenario.empty() ? "" : " (" + scenario + ")");
}

}  // namespace

void mark_best(json& rows, const std::string& metric, const std::string& item_key) {
  const bool high = higher_is_better(metric);
  std::map<std::pair<std::string, int>, std::vector<size_t>> columns;
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i]["best"] = false;
    columns[{rows[i].value("scenario", ""), rows[i]["length"].get<int>()}].push_back(i);
  }
  for (const auto& [column, members] : columns) {
    std::vector<size_t> ok;
    for (size_t i : members)
      if (std::isfinite(value_of(rows[i], metric))) ok.push_back(i);
    if (ok.size() < 2) continue;  // nothing to be better than
    std::sort(ok.begin(), ok.end(), [&](size_t a, size_t b) {
      return high ? value_of(rows[a], metric) > value_of(rows[b], metric) : value_of(rows[a], metric) < value_of(rows[b], metric);
    });
    const size_t best = ok[0];
    // Where other rows have intervals over seeds, a row of one seed (an interrupted grid, a failed seed) has a
    // spread nobody measured: nothing is best beyond it, nor is it best beyond the others.
    bool intervals = false;
    for (size_t i : ok) intervals = intervals || rows[i].value(metric + "_ci95", json(nullptr)).is_number();
    auto noise = [&](size_t i) {
      return intervals && !rows[i].value(metric + "_ci95", json(nullptr)).is_number() ? INFINITY : noise_of(rows[i], metric);
    };
    bool clear = true;
    for (size_t k = 1; k < ok.size() && clear; ++k) {
      const double gap = std::abs(value_of(rows[best], metric) - value_of(rows[ok[k]], metric));
      clear = gap > std::max(noise(best), noise(ok[k]));
    }
    rows[best]["best"] = clear;
  }
}

json mrr_ranking(const json& results, const std::string& metric, const std::string& item_key) {
  const bool high = higher_is_better(metric);
  const int train_length = results.value("train_length", json(0)).is_number() ? results["train_length"].get<int>() : 0;
  std::vector<std::string> items;
  std::vector<int> lengths;
  for (const auto& r : results["rows"]) {
    // A row no cell finished (failed, not run yet) measured nothing: such an item is not ranked at all, where
    // n/a (a length its encoding cannot reach) ranks last.
    const std::string status = r.value("status", "ok");
    if (status == "failed" || status == "missing") continue;
    if (std::find(items.begin(), items.end(), r["item"]) == items.end()) items.push_back(r["item"]);
    const int L = r["length"];
    if (L > train_length && std::find(lengths.begin(), lengths.end(), L) == lengths.end()) lengths.push_back(L);
  }
  std::map<std::pair<std::string, int>, std::map<std::string, double>> columns;  // (scenario, L) -> item -> value
  auto fill_columns = [&] {  // from `lengths`, then `lengths` again from the columns kept, in order
    columns.clear();
    for (const auto& r : results["rows"]) {
      const int L = r["length"];
      if (std::find(lengths.begin(), lengths.end(), L) == lengths.end()) continue;
      if (std::find(items.begin(), items.end(), r["item"]) == items.end()) continue;  // measured nothing anywhere
      const std::string status = r.value("status", "ok");
      if (status == "failed" || status == "missing") continue;  // a column only of these ranks nobody
      // Ranked at the precision the tables print (3 decimals): a difference they show as none is a tie.
      columns[{r.value("scenario", ""), L}][r["item"]] = std::round(value_of(r, metric) * 1000) / 1000;
    }
    // A column where no item has a number (a length longer than the validation split, say) ranks nobody: every
    // item would share its last place there, which moves the means of the items that have numbers elsewhere.
    for (auto it = columns.begin(); it != columns.end();) {
      bool any = false;
      for (const auto& [item, v] : it->second) any = any || std::isfinite(v);
      it = any ? std::next(it) : columns.erase(it);
    }
    lengths.clear();
    for (const auto& [column, values] : columns)
      if (std::find(lengths.begin(), lengths.end(), column.second) == lengths.end()) lengths.push_back(column.second);
    std::sort(lengths.begin(), lengths.end());
  };
  fill_columns();
  if (lengths.empty()) {  // nothing past the training length has a number: rank over every length
    for (const auto& r : results["rows"])
      if (std::find(lengths.begin(), lengths.end(), r["length"].get<int>()) == lengths.end()) lengths.push_back(r["length"]);
    fill_columns();
  }
  std::map<std::string, std::vector<double>> ranks;
  for (const auto& [column, values] : columns) {
    // Competition ranking ("1224"): tied items share the better rank; n/a and missing rank last.
    for (const auto& item : items) {
      auto it = values.find(item);
      const double v = it == values.end() ? NAN : it->second;
      int rank = 1;
      if (!std::isfinite(v)) {
        rank = static_cast<int>(items.size());
      } else {
        for (const auto& [other, w] : values)
          if (std::isfinite(w) && (high ? w > v : w < v)) ++rank;
      }
      ranks[item].push_back(rank);
    }
  }
  json out_items = json::array();
  for (const auto& item : items) {
    double rr = 0;
    for (double r : ranks[item]) rr += 1.0 / r;
    const auto n = ranks[item].size();
    out_items.push_back({{"name", item}, {"mrr", n ? json(rr / n) : json(nullptr)}, {"ranks", ranks[item]}});
  }
  std::stable_sort(out_items.begin(), out_items.end(), [](const json& a, const json& b) {
    return (a["mrr"].is_number() ? a["mrr"].get<double>() : -1) > (b["mrr"].is_number() ? b["mrr"].get<double>() : -1);
  });
  std::set<std::string> settings;  // the other grid keys' settings each length is ranked under
  for (const auto& [column, values] : columns) settings.insert(column.first);
  return {{"item_key", item_key}, {"metric", metric},       {"scenarios", columns.size()}, {"settings", settings.size()},
          {"lengths", lengths},   {"items", out_items}};
}

json ranking_with_fallback(const json& results, const std::string& metric, const std::string& item_key) {
  json rk = mrr_ranking(results, metric, item_key);
  if (metric == "loss") return rk;
  const int L0 = results.value("train_length", json(0)).is_number() ? results["train_length"].get<int>() : 0;
  double first = NAN;
  bool all_same = true;
  for (const auto& r : results["rows"]) {
    const double v = value_of(r, metric);
    if (r["length"].get<int>() <= L0 || !std::isfinite(v)) continue;
    if (std::isnan(first)) first = v;
    all_same = all_same && v == first;
  }
  if (!all_same || std::isnan(first)) return rk;
  json by_loss = mrr_ranking(results, "loss", item_key);
  by_loss["fallback"] = (metric == "exact_match" ? std::string("exact match") : metric) + " is " + fmt(first, 3) +
                        " for every configuration past the training length, so the ranking is by loss";
  return by_loss;
}

std::string what_this_shows(const json& results, const std::string& metric, const json& ranking) {
  const bool loss = !higher_is_better(metric);
  const int L0 = results.value("train_length", json(0)).is_number() ? results["train_length"].get<int>() : 0;
  const std::string unit = results.value("length_unit", "tokens");
  // Per row label: the value at the training length and at the longest length that has any value.
  std::map<std::string, std::map<int, json>> by_label;
  std::vector<std::string> labels;
  int longest = 0;
  for (const auto& r : results["rows"]) {
    const std::string l = label(r);
    if (!by_label.count(l)) labels.push_back(l);
    by_label[l][r["length"].get<int>()] = r;
    if (std::isfinite(value_of(r, metric))) longest = std::max(longest, r["length"].get<int>());
  }
  std::ostringstream out;
  if (labels.empty() || longest == 0) return "No cell finished, so there is nothing to summarise yet.";
  // Cells trained at different lengths (a grid over block_size): no one training length to measure from.
  const json trained = results.value("train_lengths", json::array());
  std::string mixed;
  if (trained.size() > 1)
    for (size_t i = 0; i < trained.size(); ++i)
      mixed += (i == 0 ? "" : i + 1 == trained.size() ? " and " : ", ") + trained[i].dump();
  const double margin = loss ? kFlatLossMargin : kFlatRateMargin;
  const int digits = loss ? 2 : 3;
  const std::string what = loss ? "loss" : metric == "exact_match" ? "exact match" : metric;
  if (!mixed.empty()) {
    out << "The cells were trained at different lengths (" << mixed << " " << unit << "): read each row against its "
        << "own training length in the table; below, past the training length means past the longest, " << L0 << ".";
  } else if (longest <= L0) {
    out << "Every length evaluated is within the training length (" << L0 << " " << unit
        << "), so this experiment says nothing about extrapolation.";
  } else {
    // Measured from the training length where it was evaluated; else from the longest length within it that
    // was, else the shortest evaluated ("At 300 vs 16 tokens" against rows at 8 and 300 only compared nothing).
    std::set<int> evaluated;
    for (const auto& r : results["rows"])
      if (std::isfinite(value_of(r, metric))) evaluated.insert(r["length"].get<int>());
    int base = *evaluated.begin();
    for (int L : evaluated)
      if (L <= L0) base = L;
    const std::string at_base = base == L0 ? "at the training length" : "at " + std::to_string(base) + " " + unit;
    std::vector<std::string> flat, improved, na, missing;
    std::vector<std::pair<double, std::string>> moved_by;  // largest change first
    bool any_positive_past = false;
    for (const auto& l : labels) {
      auto& m = by_label[l];
      const double v0 = m.count(base) ? value_of(m[base], metric) : NAN;
      const double v1 = m.count(longest) ? value_of(m[longest], metric) : NAN;
      for (const auto& [L, r] : m)
        if (L > L0 && value_of(r, metric) > 0) any_positive_past = true;
      if (m.count(longest) && m[longest]["status"].get<std::string>().rfind("n/a", 0) == 0) {
        int last_ok = 0;
        for (const auto& [L, r] : m)
          if (std::isfinite(value_of(r, metric))) last_ok = std::max(last_ok, L);
        na.push_back(l + (last_ok ? " past " + std::to_string(last_ok) + " " + unit : ""));
      } else if (!std::isfinite(v0) || !std::isfinite(v1)) {
        missing.push_back(l);
      } else {
        const double d = v1 - v0;
        // The level too: flat at a bad loss (a scaling that breaks even the training length) is no win.
        const std::string item = l + " (" + signed_fmt(d, digits) + " to " + fmt(v1, digits) + ")";
        if (std::abs(d) <= margin) flat.push_back(item);
        else if (loss ? d < 0 : d > 0) improved.push_back(item);  // better past the training length, by more
        else moved_by.push_back({-std::abs(d), item});
      }
    }
    std::stable_sort(moved_by.begin(), moved_by.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> moved;
    for (const auto& m : moved_by) moved.push_back(m.second);
    const double ratio = static_cast<double>(longest) / std::max(1, L0);
    out << "At " << times(ratio) << " the training length (" << longest << " vs " << L0 << " " << unit;
    if (base != L0)
      out << "; measured from " << base << " " << unit << ", the " << (base < L0 ? "longest length within the training "
                                                                                   "length"
                                                                                 : "shortest length")
          << " evaluated";
    out << "), ";
    if (!loss && !any_positive_past) {
      out << "no configuration gets a single example right past the training length; compare the losses to see how "
             "far each one degrades.";
    } else {
      std::vector<std::string> clauses;
      const std::string within = fmt(margin, 2) + (loss ? " nats" : "");
      if (!flat.empty())
        clauses.push_back(join(flat) + (flat.size() == 1 ? " stays" : " stay") + " within " + within + " of " +
                          (flat.size() == 1 ? "its" : "their") + " " + what + " " + at_base);
      if (!moved.empty())
        clauses.push_back(join(moved) + (loss ? (moved.size() == 1 ? " rises" : " rise") : (moved.size() == 1 ? " drops" : " drop")) +
                          (flat.empty() ? " by more than " + within : " by more"));
      if (!improved.empty())
        clauses.push_back(join(improved) +
                          (loss ? (improved.size() == 1 ? " falls" : " fall") : (improved.size() == 1 ? " rises" : " rise")) +
                          " by more than " + within + ", better past the training length than " +
                          (base == L0 ? "at it" : at_base));
      for (size_t i = 0; i < clauses.size(); ++i) out << (i ? "; " : "") << clauses[i];
      if (clauses.empty()) out << "no configuration has a value at both " << base << " and " << longest << " " << unit;
      out << ".";
    }
    if (!na.empty()) out << " Not applicable: " << join(na) << ".";
    if (!missing.empty()) out << " No value at both lengths: " << join(missing) << ".";
  }
  // Who is best where, only where it is best beyond noise.
  for (int L : {L0, longest}) {
    std::vector<std::string> best;
    bool per_scenario = false;  // best is marked among the rows of one scenario (mark_best): say so
    for (const auto& r : results["rows"])
      if (r["length"] == L && r.value("best", false)) {
        best.push_back(label(r) + " (" + fmt(value_of(r, metric), digits + 1) + ")");
        per_scenario = per_scenario || !r.value("scenario", "").empty();
      }
    if (!best.empty())
      out << " Best " << what << " at " << L << " " << unit << (per_scenario ? ", in each scenario" : "") << ": " << join(best) << ".";
    if (L0 == longest) break;
  }
  if (ranking.is_object() && !ranking["items"].empty() && ranking["items"][0]["mrr"].is_number()) {
    std::vector<std::string> top;
    for (const auto& it : ranking["items"]) top.push_back(it["name"].get<std::string>() + " " + fmt(it["mrr"].get<double>(), 2));
    out << " Mean reciprocal rank" << (ranking.contains("fallback") ? " by loss (" + ranking["fallback"].get<std::string>() + ")" : "")
        << " over " << ranking["scenarios"].get<int>()
        << (ranking.value("settings", 1) > 1 ? " scenario" : " length") << (ranking["scenarios"].get<int>() == 1 ? "" : "s")
        << ": " << join(top) << ".";
  }
  int seeds = 0;
  for (const auto& r : results["rows"]) seeds = std::max(seeds, r.value("n", 0));
  out << (seeds <= 1 ? " One seed: differences smaller than seed-to-seed noise cannot be told apart here."
                     : " Over " + std::to_string(seeds) + " seeds; values are marked best only when their 95% intervals "
                                                          "separate them from every other.");
  return out.str();
}

std::string times(double ratio) { return fmt(ratio, ratio == std::floor(ratio) ? 0 : 1) + "x"; }

}  // namespace poslab
