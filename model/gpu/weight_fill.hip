// Weights made on the device (weight_fill.h): one thread an element, a splitmix64 hash of the seed
// and the element's index to a uniform value.
#include "weight_fill.h"

namespace dsv4h::model::gpu {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__global__ void fill_uniform_kernel(void* out, bool bf16, int64_t n, float lo, float hi, uint64_t seed) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= n) return;
  const float u = static_cast<float>(splitmix64(seed ^ splitmix64(static_cast<uint64_t>(i))) >> 40) * 0x1p-24f;
  const float v = lo + (hi - lo) * u;
  if (bf16)
    static_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(pack_bf16x2_rn(v, 0.f) & 0xffffu);
  else
    static_cast<float*>(out)[i] = v;
}

__global__ void fill_hash_routing_kernel(int32_t* out, int64_t tokens, int64_t k, int64_t experts) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= tokens * k) return;
  out[i] = static_cast<int32_t>(((i / k) * 7 + i % k) % experts);
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

void launch_fill_uniform(void* out, bool bf16, int64_t n, float lo, float hi, uint64_t seed, hipStream_t stream) {
  if (n <= 0) return;
  fill_uniform_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, bf16, n, lo, hi, seed);
  DSV4H_LAUNCH_CHECK("fill_uniform_kernel");
}

void launch_fill_hash_routing(int32_t* out, int64_t tokens, int64_t k, int64_t experts, hipStream_t stream) {
  if (tokens * k <= 0) return;
  fill_hash_routing_kernel<<<blocks_for(tokens * k), kThreads, 0, stream>>>(out, tokens, k, experts);
  DSV4H_LAUNCH_CHECK("fill_hash_routing_kernel");
}

}  // namespace dsv4h::model::gpu
