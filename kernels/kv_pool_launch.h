// What the pool kernels' launch wrappers share: argument checks, the store's grid rule (which its
// bandwidth floor follows, tests/bench/floors/kv_pool_floor.hip), and the SWA-only translation the
// pool_cached_loc mutant runs inside a layer's store (kv_pool_translate.hip).
#pragma once

#include <stdexcept>
#include <string>

#include "kv_pool.h"

namespace dsv4h {

inline void kv_require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("memory_pool kernels: " + message);
}

// Tokens (entries) a store's thread group stores per block, their loads all issued before any is
// used: kStoreBulkSteps where the grid fills the device anyway (fewer, fuller blocks), one where it
// would not (a decode's few tokens spread over more blocks, each thread's chain of work one token
// long). Up to kStoreOneStepTokens a ratio-0 layer's grid of 1-step blocks (4 MODEL1 tokens each;
// 30 registers a thread, so 8 blocks an SM) stays within one wave of the H200 (132 SMs: 4224
// tokens); a ratio-4 layer's three parts take up to about two waves there. Measured on the H200
// (ci/gpu-ab, 4 rounds, reports/gpu/2026-12-03-892f9d4-h200-ab-store-steps1.json): 4096 tokens
// 5.3-5.9 -> 4.9-5.2 us with one step; 65536 and 1M tokens slower with one step (31.7 -> 32.5 us
// and 442 -> 468 us at page runs).
constexpr int kStoreBulkSteps = 4;
constexpr int64_t kStoreOneStepTokens = 4096;

void launch_kv_translate_swa(const KvStepLocations& step, int32_t* destination, hipStream_t stream);

}  // namespace dsv4h
