// Launch wrappers of the mHC hyper-connections (spec 2.2) with hc_mult = 4 streams: hc_pre
// (kernels/mhc_pre.hip) and hc_post (kernels/mhc_post.hip).
//
// Both compute in fp64 and round each output once (bf16 streams, fp32 post and comb). The op is
// small beside the layer's GEMMs (24 dot products and a 4x4 Sinkhorn per token, five products per
// output element), and fp64 makes each result the exact value rounded once, so the per-op checks
// that issue 31's bisection builds on are elementwise and tight: in fp32, the mix's cancelling
// dot products and 20 Sinkhorn passes have no error bound the tolerance table could state.
#pragma once

#include <cstdint>

#include "portability.h"

namespace dsv4h {

constexpr int kHcMult = 4;
constexpr int kHcMix = (2 + kHcMult) * kHcMult;  // pre, post and the 4 x 4 combination

// bf16 values travel as their raw 16-bit patterns so that no vendor bf16 type crosses this boundary.
struct MhcPreArgs {
  const uint16_t* h;     // [tokens, 4, dim] bf16: the residual streams
  const float* fn;       // [24, 4 * dim]
  const float* scale;    // [3]: of pre, post, comb
  const float* base;     // [24]
  uint16_t* x;           // [tokens, dim] bf16: sum_i pre_i h_i, the layer's input
  float* post;           // [tokens, 4]: 2 sigmoid(.)
  float* comb;           // [tokens, 4, 4]: the Sinkhorn-normalised combination, comb[i][j] from stream i to j
  int64_t tokens, dim, sinkhorn_iters;
  double hc_eps, norm_eps;
};

struct MhcPostArgs {
  const uint16_t* x;         // [tokens, dim] bf16: the layer's output
  const uint16_t* residual;  // [tokens, 4, dim] bf16: the streams hc_pre read
  const float* post;         // [tokens, 4]
  const float* comb;         // [tokens, 4, 4]
  uint16_t* h;               // [tokens, 4, dim] bf16: h_j = post_j x + sum_i comb[i][j] residual_i
  int64_t tokens, dim;
};

// Throw (naming the field) on impossible sizes; enqueue one kernel on `stream`, no host sync.
void launch_mhc_pre(const MhcPreArgs& args, hipStream_t stream);
void launch_mhc_post(const MhcPostArgs& args, hipStream_t stream);

#if defined(__CUDACC__) || defined(__HIPCC__)
__device__ __forceinline__ double bf16_bits_to_double(uint16_t bits) {
  return static_cast<double>(__uint_as_float(static_cast<uint32_t>(bits) << 16));
}

// A double rounded once to the nearest bf16 (ties to even): rounding through float would round
// twice. The 45 low mantissa bits are rounded off in the double's own bit pattern, which leaves a
// value float holds exactly. Below 2^-126 (bf16 subnormals, not met by the streams) the float
// conversion rounds a second time.
__device__ __forceinline__ uint16_t bf16_from_double(double value) {
  unsigned long long u = static_cast<unsigned long long>(__double_as_longlong(value));
  if ((u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) return 0x7fc0;  // NaN
  constexpr unsigned long long kDropped = (1ull << 45) - 1;
  u += (kDropped >> 1) + ((u >> 45) & 1ull);
  u &= ~kDropped;
  const float f = static_cast<float>(__longlong_as_double(static_cast<long long>(u)));
  return static_cast<uint16_t>(__float_as_uint(f) >> 16);
}
#endif

}  // namespace dsv4h
