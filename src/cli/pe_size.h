// pe's --max-values guard: a table too large to print is refused before it is computed (its shape
// extrapolated from the same kind's tables at three small sizes: a bias of 50 000 positions is ~10 GB
// to compute before it could be counted), and the tables are counted exactly once computed.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace poslab {

using PeTables = std::map<std::string, torch::Tensor>;

// Throws ConfigError (naming the kind, the values and every table's shape) when the tables of n positions
// hold more than max_values values in all. refuse_oversized_tables counts computed tables; the other asks
// tables_at for 8, 12 and 16 positions and extrapolates each size that grows by the same step from 8 to 12
// as from 12 to 16 (every built-in kind: N, N/2, N x N); a kind whose sizes do not, or that cannot give
// tables that small, is left to the exact count.
void refuse_oversized_tables(const PeTables& tables, int64_t n, const std::string& kind, int64_t max_values);
void refuse_oversized_before_computing(const std::function<PeTables(int64_t)>& tables_at, int64_t n,
                                       const std::string& kind, int64_t max_values);

}  // namespace poslab
