// RMSNorm of bf16 rows (spec 2.3): y = w * (x * rsqrt(mean(x^2) + eps)), all in fp32, each output
// rounded once to bf16.
//
// Design: one block per row (grid-stride over rows). Rows are short (128 to 7168 values, at most
// 14 KB), so the block reads its row twice: once for the sum of squares (a block reduction in
// shared memory, written for any warp size: 32 on NVIDIA, 64 on AMD), once for the scaled output;
// the second read hits the cache. Where dim is a multiple of 8 and the pointers are 16-byte
// aligned (every DeepSeek-V4 norm) each thread moves 8 bf16 per access; otherwise one at a time.
//
// Mutants, compiled in only when the build defines one of them; the suite must catch each:
// DSV4H_MUTANT_EPS_OUTSIDE_SQRT (1 / (sqrt(mean) + eps)), DSV4H_MUTANT_MEAN_OVER_DIM_MINUS_1
// (the sum of squares divided by dim - 1) and DSV4H_MUTANT_NOOP (nothing written).
#include "rms_norm.h"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace dsv4h {
namespace {

constexpr int kThreads = 256;
constexpr int kVec = 8;  // bf16 values per 16-byte vector

__device__ __forceinline__ float bf16_to_float(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}
__device__ __forceinline__ float lo_half(uint32_t w) { return bf16_to_float(static_cast<uint16_t>(w)); }
__device__ __forceinline__ float hi_half(uint32_t w) { return bf16_to_float(static_cast<uint16_t>(w >> 16)); }

// The sum of every thread's `value`, returned to all threads of the block.
__device__ __forceinline__ float block_sum(float value, float* scratch) {
  scratch[threadIdx.x] = value;
  sync_block();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
    sync_block();
  }
  const float total = scratch[0];
  sync_block();  // scratch is reused by the next row
  return total;
}

__device__ __forceinline__ float inverse_rms(float sum_squares, int64_t dim, float eps) {
#if defined(DSV4H_MUTANT_MEAN_OVER_DIM_MINUS_1)
  const float mean = sum_squares / static_cast<float>(dim - 1);
#else
  const float mean = sum_squares / static_cast<float>(dim);
#endif
#if defined(DSV4H_MUTANT_EPS_OUTSIDE_SQRT)
  return 1.f / (sqrtf(mean) + eps);
#else
  return rsqrtf(mean + eps);
#endif
}

__device__ __forceinline__ float sum_squares_vec(uint4 v) {
  float s = 0.f;
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) s += lo_half(words[i]) * lo_half(words[i]) + hi_half(words[i]) * hi_half(words[i]);
  return s;
}

__global__ void __launch_bounds__(kThreads) rms_norm_kernel(RmsNormArgs args, bool vectorized) {
  schedule_point();
#if defined(DSV4H_MUTANT_NOOP)
  if (args.rows >= 0) return;
#endif
  __shared__ float scratch[kThreads];
  for (int64_t row = blockIdx.x; row < args.rows; row += gridDim.x) {
    const uint16_t* x = args.x + row * args.dim;
    uint16_t* y = args.y + row * args.dim;
    float partial = 0.f;
    if (vectorized) {
      for (int64_t v = threadIdx.x; v < args.dim / kVec; v += kThreads)
        partial += sum_squares_vec(load_read_only(reinterpret_cast<const uint4*>(x) + v));
    } else {
      for (int64_t k = threadIdx.x; k < args.dim; k += kThreads) partial += bf16_to_float(x[k]) * bf16_to_float(x[k]);
    }
    const float r = inverse_rms(block_sum(partial, scratch), args.dim, args.eps);
    if (vectorized) {
      for (int64_t v = threadIdx.x; v < args.dim / kVec; v += kThreads) {
        const uint4 in = load_read_only(reinterpret_cast<const uint4*>(x) + v);
        const float4 w0 = load_read_only(reinterpret_cast<const float4*>(args.weight) + 2 * v);
        const float4 w1 = load_read_only(reinterpret_cast<const float4*>(args.weight) + 2 * v + 1);
        uint4 out;  // y = w * (x * r): the reference's order of operations
        out.x = pack_bf16x2_rn(w0.x * (lo_half(in.x) * r), w0.y * (hi_half(in.x) * r));
        out.y = pack_bf16x2_rn(w0.z * (lo_half(in.y) * r), w0.w * (hi_half(in.y) * r));
        out.z = pack_bf16x2_rn(w1.x * (lo_half(in.z) * r), w1.y * (hi_half(in.z) * r));
        out.w = pack_bf16x2_rn(w1.z * (lo_half(in.w) * r), w1.w * (hi_half(in.w) * r));
        reinterpret_cast<uint4*>(y)[v] = out;
      }
    } else {
      for (int64_t k = threadIdx.x; k < args.dim; k += kThreads)
        y[k] = static_cast<uint16_t>(pack_bf16x2_rn(args.weight[k] * (bf16_to_float(x[k]) * r), 0.f));
    }
  }
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("rms_norm: " + message);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

void launch_rms_norm(const RmsNormArgs& args, hipStream_t stream) {
  require(args.rows >= 0, "rows must be >= 0, got " + std::to_string(args.rows));
  require(args.dim > 0, "dim must be > 0, got " + std::to_string(args.dim));
  require(args.eps >= 0.f, "eps must be >= 0");
  if (args.rows == 0) return;
  require(args.x && args.weight && args.y, "null device pointer");
  const bool vectorized =
      args.dim % kVec == 0 && aligned16(args.x) && aligned16(args.weight) && aligned16(args.y);
  // Rows beyond 2^16 blocks share blocks: enough to fill any device, no grid-size limit reached.
  const int64_t blocks = args.rows < 65536 ? args.rows : 65536;
  rms_norm_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args, vectorized);
  DSV4H_LAUNCH_CHECK("rms_norm_kernel");
}

}  // namespace dsv4h
