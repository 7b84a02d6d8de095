// Weights made on the device (issue 31's benchmarks at the real configs' shapes): the Flash
// config's 256 experts are 13 GB of bf16 a layer, too many to make in fp64 on the host and upload.
// Values are uniform in [lo, hi), each element's from a hash of (seed, its index): seeded and
// reproducible, not the host's make_weights values (model/weights.h), which nothing compares them with.
#pragma once

#include <cstdint>

#include "kernels/portability.h"

namespace dsv4h::model::gpu {

// out[i] for i < n: uniform in [lo, hi), as bf16 bits (bf16 true) or fp32.
void launch_fill_uniform(void* out, bool bf16, int64_t n, float lo, float hi, uint64_t seed, hipStream_t stream);

// out[t * k + j] = (t * 7 + j) % experts for t < tokens, j < k: a hash routing table whose k
// experts of a token are distinct (k <= experts).
void launch_fill_hash_routing(int32_t* out, int64_t tokens, int64_t k, int64_t experts, hipStream_t stream);

}  // namespace dsv4h::model::gpu
