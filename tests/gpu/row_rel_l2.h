// The largest per-row relative L2 error of `got` against `expected`, both fp32 [rows, cols]: the
// expert-parallel tests' measure of partial sums added in another order (a zero row must stay zero).
#pragma once

#include <algorithm>
#include <cmath>

#include "harness/tensor.h"

namespace dsv4h::testing {

inline double worst_row_rel_l2(const HostTensor& expected, const HostTensor& got) {
  const int64_t rows = expected.shape()[0], cols = rows ? expected.numel() / rows : 0;
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double diff = 0, norm = 0;
    for (int64_t k = 0; k < cols; ++k) {
      const double e = expected.get(r * cols + k), d = got.get(r * cols + k) - e;
      diff += d * d, norm += e * e;
    }
    worst = std::max(worst, norm > 0 ? std::sqrt(diff / norm) : (diff > 0 ? INFINITY : 0.0));
  }
  return worst;
}

}  // namespace dsv4h::testing
