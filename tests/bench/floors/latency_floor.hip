#include "latency_floor.h"

#include <stdexcept>
#include <string>

namespace dsv4h {
namespace {
__global__ void dependent_loads(const int32_t* chain, int32_t* out, int depth) {
  int32_t at = static_cast<int32_t>(threadIdx.x);
  for (int d = 0; d < depth; ++d) at = chain[at * kChainStride];
  out[threadIdx.x] = at;
}
}  // namespace

void launch_dependent_loads(const int32_t* chain, int32_t* out, int depth, hipStream_t stream) {
  if (depth < 0) throw std::invalid_argument("dependent_loads: depth must be >= 0, got " + std::to_string(depth));
  dependent_loads<<<1, kChainEntries, 0, stream>>>(chain, out, depth);
  DSV4H_LAUNCH_CHECK("dependent_loads");
}
}  // namespace dsv4h
