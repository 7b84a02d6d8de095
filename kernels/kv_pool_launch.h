// What the pool kernels' launch wrappers share: argument checks, and the SWA-only translation the
// pool_cached_loc mutant runs inside a layer's store (kv_pool_translate.hip).
#pragma once

#include <stdexcept>
#include <string>

#include "kv_pool.h"

namespace dsv4h {

inline void kv_require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("memory_pool kernels: " + message);
}

void launch_kv_translate_swa(const KvStepLocations& step, int32_t* destination, hipStream_t stream);

}  // namespace dsv4h
