// The latency floor of a decode-size kernel: an empty kernel, plus the round trips it cannot avoid.
// dependent_loads(depth) makes `depth` loads of which each needs the previous one's value (as
// filtered_silu_mul's data loads need its expert ids), then one store. Benchmarks time it next to the
// real kernels, so that a decode-size result is read against what any kernel with that chain costs.
#pragma once

#include <cstdint>

#include "portability.h"

namespace dsv4h {
// `chain` holds 32 int32 indices in [0, 32) on the device; `out` 32 int32.
void launch_dependent_loads(const int32_t* chain, int32_t* out, int depth, hipStream_t stream);
}  // namespace dsv4h
