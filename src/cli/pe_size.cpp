// pe's --max-values guard (pe_size.h): the exact count of computed tables, and the estimate before them.
#include "cli/pe_size.h"

#include <exception>
#include <vector>

#include "config/config.h"

namespace poslab {

namespace {

using Shapes = std::vector<std::pair<std::string, std::vector<double>>>;  // name -> sizes, in the tables' order

// One message for both checks, so that an estimate and a count of the same tables read alike.
void refuse_if_over(const Shapes& shapes, int64_t n, const std::string& kind, int64_t max_values) {
  double values = 0;
  std::string text;
  for (const auto& [name, sizes] : shapes) {
    double numel = 1;
    std::string dims;
    for (size_t d = 0; d < sizes.size(); ++d) {
      numel *= sizes[d];
      dims += (d ? ", " : "") + std::to_string(static_cast<int64_t>(sizes[d]));
    }
    values += numel;
    text += (text.empty() ? "" : ", ") + name + " (" + dims + ")";  // bias (1, 5000, 5000)
  }
  if (values <= static_cast<double>(max_values)) return;
  const std::string count = values < 9e18 ? std::to_string(static_cast<int64_t>(values)) : "more than 9e18";
  throw ConfigError("--positions " + std::to_string(n) + ": --kind " + kind + " gives " + count + " values (" + text +
                    "), more than --max-values " + std::to_string(max_values) +
                    " (~30 bytes each as CSV); give fewer --positions, or raise --max-values");
}

Shapes shapes_of(const PeTables& tables) {
  Shapes out;
  for (const auto& [name, t] : tables) out.emplace_back(name, std::vector<double>(t.sizes().begin(), t.sizes().end()));
  return out;
}

}  // namespace

void refuse_oversized_tables(const PeTables& tables, int64_t n, const std::string& kind, int64_t max_values) {
  refuse_if_over(shapes_of(tables), n, kind, max_values);
}

void refuse_oversized_before_computing(const std::function<PeTables(int64_t)>& tables_at, int64_t n,
                                       const std::string& kind, int64_t max_values) {
  constexpr int64_t a = 8, b = 12, c = 16;
  if (n <= c) return;  // as small as the samples: the exact count is as cheap
  Shapes sa, sb, sc;
  try {
    sa = shapes_of(tables_at(a));
    sb = shapes_of(tables_at(b));
    sc = shapes_of(tables_at(c));
  } catch (const std::exception&) {
    return;  // e.g. a --param naming a position past 8: the tables of n itself say what is wrong
  }
  if (sa.size() != sb.size() || sb.size() != sc.size()) return;
  Shapes at_n;
  for (size_t i = 0; i < sa.size(); ++i) {
    const auto &da = sa[i].second, &db = sb[i].second, &dc = sc[i].second;
    if (sa[i].first != sb[i].first || sb[i].first != sc[i].first || da.size() != db.size() || db.size() != dc.size())
      return;
    std::vector<double> sizes;
    for (size_t d = 0; d < da.size(); ++d) {
      if (db[d] - da[d] != dc[d] - db[d]) return;  // not a straight line in n: left to the count
      sizes.push_back(da[d] + (db[d] - da[d]) / (b - a) * static_cast<double>(n - a));
    }
    at_n.emplace_back(sa[i].first, sizes);
  }
  refuse_if_over(at_n, n, kind, max_values);
}

}  // namespace poslab
