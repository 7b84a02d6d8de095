// hc_pre of the mHC hyper-connections (spec 2.2): from a token's 4 residual streams h [4 * dim],
// mix = (fn @ h) * rsqrt(mean(h^2) + norm_eps) [24]; pre = sigmoid(mix[0:4] s0 + base) + hc_eps,
// post = 2 sigmoid(mix[4:8] s1 + base), comb = Sinkhorn(softmax_rows(mix[8:24] s2 + base) + hc_eps)
// with sinkhorn_iters passes (the first a column pass after the softmax, then rows and columns,
// ending on columns); x = sum_i pre_i h_i. All in fp64, each output rounded once (kernels/mhc.h).
//
// Design: one block per token (grid-stride over tokens). Each thread accumulates the sum of squares
// and its share of the 24 dot products over a strided slice of the 4 * dim values; the 25 sums are
// reduced across the warp with shuffles (any warp size), then across the warps in shared memory.
// One thread runs the 4 x 4 Sinkhorn (a few hundred flops) and publishes pre; the block then
// writes x.
//
// Mutants, compiled in only when the build defines one of them; the suite must catch each:
// DSV4H_MUTANT_SINKHORN_ONE_FEWER (one Sinkhorn pass fewer) and DSV4H_MUTANT_NOOP.
#include "mhc.h"

#include <stdexcept>
#include <string>

namespace dsv4h {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxWarps = kThreads / 32;
constexpr int kSums = kHcMix + 1;  // the 24 dot products and the sum of squares

__device__ __forceinline__ double sum_over_warp(double value) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) {
#if defined(DSV4H_GPU_NVIDIA)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
#else
    value += __shfl_xor(value, offset);
#endif
  }
  return value;
}

__device__ __forceinline__ double sigmoid(double v) { return 1.0 / (1.0 + exp(-v)); }

// pre, post and comb of one token from its mix (thread 0 only), in the reference's order.
__device__ void split_sinkhorn(const MhcPreArgs& args, const double* mix, double* pre, double* post,
                               double (*c)[kHcMult]) {
  const double eps = args.hc_eps;
  for (int i = 0; i < kHcMult; ++i) {
    pre[i] = sigmoid(mix[i] * args.scale[0] + args.base[i]) + eps;
    post[i] = 2.0 * sigmoid(mix[kHcMult + i] * args.scale[1] + args.base[kHcMult + i]);
  }
  for (int i = 0; i < kHcMult; ++i) {  // row softmax, then eps
    double m = -INFINITY, sum = 0.0;
    for (int j = 0; j < kHcMult; ++j) {
      c[i][j] = mix[2 * kHcMult + i * kHcMult + j] * args.scale[2] + args.base[2 * kHcMult + i * kHcMult + j];
      m = fmax(m, c[i][j]);
    }
    for (int j = 0; j < kHcMult; ++j) sum += (c[i][j] = exp(c[i][j] - m));
    for (int j = 0; j < kHcMult; ++j) c[i][j] = c[i][j] / sum + eps;
  }
  auto normalise_columns = [&] {
    for (int j = 0; j < kHcMult; ++j) {
      double sum = 0.0;
      for (int i = 0; i < kHcMult; ++i) sum += c[i][j];
      for (int i = 0; i < kHcMult; ++i) c[i][j] /= sum + eps;
    }
  };
  normalise_columns();
#if defined(DSV4H_MUTANT_SINKHORN_ONE_FEWER)
  const int64_t passes = args.sinkhorn_iters - 1;
#else
  const int64_t passes = args.sinkhorn_iters;
#endif
  for (int64_t it = 1; it < passes; ++it) {  // rows then columns: ends on a column pass
    for (int i = 0; i < kHcMult; ++i) {
      double sum = 0.0;
      for (int j = 0; j < kHcMult; ++j) sum += c[i][j];
      for (int j = 0; j < kHcMult; ++j) c[i][j] /= sum + eps;
    }
    normalise_columns();
  }
}

__global__ void __launch_bounds__(kThreads) mhc_pre_kernel(MhcPreArgs args) {
  schedule_point();
#if defined(DSV4H_MUTANT_NOOP)
  if (args.tokens >= 0) return;
#endif
  __shared__ double warp_sums[kSums][kMaxWarps];
  __shared__ double sums[kSums];
  __shared__ double pre_shared[kHcMult];
  const int64_t width = kHcMult * args.dim;
  const int warps = kThreads / warpSize, warp = threadIdx.x / warpSize, lane = threadIdx.x % warpSize;
  for (int64_t t = blockIdx.x; t < args.tokens; t += gridDim.x) {
    const uint16_t* h = args.h + t * width;
    double acc[kSums] = {};
    for (int64_t k = threadIdx.x; k < width; k += kThreads) {
      const double v = bf16_bits_to_double(h[k]);
      acc[kHcMix] += v * v;
#pragma unroll
      for (int j = 0; j < kHcMix; ++j) acc[j] += static_cast<double>(args.fn[j * width + k]) * v;
    }
#pragma unroll
    for (int j = 0; j < kSums; ++j) {
      const double s = sum_over_warp(acc[j]);
      if (lane == 0) warp_sums[j][warp] = s;
    }
    sync_block();
    if (static_cast<int>(threadIdx.x) < kSums) {
      double s = 0.0;
      for (int w = 0; w < warps; ++w) s += warp_sums[threadIdx.x][w];
      sums[threadIdx.x] = s;
    }
    sync_block();
    if (threadIdx.x == 0) {
      const double r = 1.0 / sqrt(sums[kHcMix] / static_cast<double>(width) + args.norm_eps);
      double mix[kHcMix], pre[kHcMult], post[kHcMult], c[kHcMult][kHcMult];
      for (int j = 0; j < kHcMix; ++j) mix[j] = sums[j] * r;
      split_sinkhorn(args, mix, pre, post, c);
      for (int i = 0; i < kHcMult; ++i) {
        pre_shared[i] = pre[i];
        args.post[t * kHcMult + i] = static_cast<float>(post[i]);
        for (int j = 0; j < kHcMult; ++j) args.comb[(t * kHcMult + i) * kHcMult + j] = static_cast<float>(c[i][j]);
      }
    }
    sync_block();
    for (int64_t k = threadIdx.x; k < args.dim; k += kThreads) {
      double y = 0.0;
      for (int i = 0; i < kHcMult; ++i) y += pre_shared[i] * bf16_bits_to_double(h[i * args.dim + k]);
      args.x[t * args.dim + k] = bf16_from_double(y);
    }
    sync_block();  // warp_sums, sums and pre_shared are reused by the next token
  }
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("mhc_pre: " + message);
}

}  // namespace

void launch_mhc_pre(const MhcPreArgs& args, hipStream_t stream) {
  require(args.tokens >= 0, "tokens must be >= 0, got " + std::to_string(args.tokens));
  require(args.dim > 0, "dim must be > 0, got " + std::to_string(args.dim));
  require(args.sinkhorn_iters >= 1, "sinkhorn_iters must be >= 1, got " + std::to_string(args.sinkhorn_iters));
  require(args.hc_eps >= 0 && args.norm_eps >= 0, "hc_eps and norm_eps must be >= 0");
  if (args.tokens == 0) return;
  require(args.h && args.fn && args.scale && args.base && args.x && args.post && args.comb, "null device pointer");
  const int64_t blocks = args.tokens < 65536 ? args.tokens : 65536;
  mhc_pre_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args);
  DSV4H_LAUNCH_CHECK("mhc_pre_kernel");
}

}  // namespace dsv4h
