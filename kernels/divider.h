// Division by a divisor fixed at launch, as a multiplication by a magic number computed on the
// host. A 32-bit division on the GPU is a chain of about 15 dependent instructions; on a
// latency-bound kernel's critical path that chain is worth removing.
#pragma once

#include <cstdint>

#include "portability.h"

namespace dsv4h {

// n / d as (n * multiplier) >> shift, exact for every n < 2^31 (multiplier = ceil(2^shift / d),
// shift = 31 + ceil(log2 d): the rounding error times n stays below 2^shift / d), for d in [1, 2^31]:
// callers check d >= 1.
struct Divider {
  uint32_t multiplier, shift;
};

inline Divider divider_for(uint32_t d) {
  uint32_t log2_ceil = 0;
  while ((uint64_t{1} << log2_ceil) < d) ++log2_ceil;
  const uint32_t shift = 31 + log2_ceil;
  return Divider{static_cast<uint32_t>(((uint64_t{1} << shift) + d - 1) / d), shift};
}

#if defined(__CUDACC__) || defined(__HIPCC__)
__device__ __forceinline__ uint32_t divide(uint32_t n, Divider d) {
  return static_cast<uint32_t>((static_cast<uint64_t>(n) * d.multiplier) >> d.shift);
}
#endif

}  // namespace dsv4h
