// A floor for decode-size kernels: dependent_loads(depth) makes `depth` loads of which each needs the
// previous one's value (as filtered_silu_mul's data loads need its expert ids), then one store. The
// chain's entries lie kChainStride int32 apart, one 128-byte line each, so that no step finds its
// line in L1 from the step before. Benchmarks time it next to the real kernels, so that a
// decode-size result is read against a kernel that does nothing but that chain.
#pragma once

#include <cstdint>

#include "kernels/portability.h"

namespace dsv4h {
inline constexpr int kChainEntries = 32;  // one per thread of the one-warp launch
inline constexpr int kChainStride = 32;   // int32 between entries: 128 bytes
// `chain` holds kChainEntries x kChainStride int32 on the device; entry e, at chain[e *
// kChainStride], is the next entry, in [0, kChainEntries). `out` holds kChainEntries int32.
void launch_dependent_loads(const int32_t* chain, int32_t* out, int depth, hipStream_t stream);
}  // namespace dsv4h
