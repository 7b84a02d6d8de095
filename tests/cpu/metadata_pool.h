// A seeded request pool for the metadata tests: each request slot owns whole 256-token pages drawn
// at random (page 0 stays the write sink), and every full slot maps to a random SWA slot.
#pragma once

#include <algorithm>
#include <numeric>
#include <vector>

#include "harness/random.h"
#include "reference/attn_metadata.h"

namespace dsv4h::testing {

inline reference::StepInputs metadata_pool(int64_t pool, int64_t ctx, uint64_t seed) {
  using reference::kPageSize;
  Rng rng(seed);
  const int64_t pages_per_slot = (ctx + kPageSize - 1) / kPageSize;
  std::vector<int32_t> pages(static_cast<size_t>(pool * pages_per_slot));
  std::iota(pages.begin(), pages.end(), 1);
  for (size_t i = pages.size(); i > 1; --i) std::swap(pages[i - 1], pages[static_cast<size_t>(rng.integer(0, i - 1))]);
  reference::StepInputs in;
  in.req_to_token.resize(pool, ctx);
  for (int64_t s = 0; s < pool; ++s)
    for (int64_t pos = 0; pos < ctx; ++pos)
      in.req_to_token(s, pos) = static_cast<int32_t>(pages[s * pages_per_slot + pos / kPageSize] * kPageSize + pos % kPageSize);
  in.full_to_swa.resize((pool * pages_per_slot + 1) * kPageSize, 1);
  for (int64_t i = 0; i < in.full_to_swa.rows(); ++i) in.full_to_swa(i, 0) = static_cast<int32_t>(rng.integer(1, 1 << 20));
  return in;
}

// One column of int32 values.
inline reference::IndexMatrix column(std::vector<int32_t> values) {
  reference::IndexMatrix m(static_cast<int64_t>(values.size()), 1);
  for (size_t i = 0; i < values.size(); ++i) m(static_cast<int64_t>(i), 0) = values[i];
  return m;
}

}  // namespace dsv4h::testing
