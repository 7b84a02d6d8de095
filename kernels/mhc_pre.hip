// hc_pre of the mHC hyper-connections (spec 2.2): from a token's 4 residual streams h [4 * dim],
// mix = (fn @ h) * rsqrt(mean(h^2) + norm_eps) [24]; pre = sigmoid(mix[0:4] s0 + base) + hc_eps,
// post = 2 sigmoid(mix[4:8] s1 + base), comb = Sinkhorn(softmax_rows(mix[8:24] s2 + base) + hc_eps)
// with sinkhorn_iters passes (the first a column pass after the softmax, then rows and columns,
// ending on columns); x = sum_i pre_i h_i. All in fp64, each output rounded once (kernels/mhc.h).
//
// Design: one block per token (grid-stride over tokens). Each thread accumulates the sum of squares
// and its share of the 24 dot products over a strided slice of the 4 * dim values, four consecutive
// values at a time: one 8-byte load of h and one 16-byte load of each fn row, so that each thread
// has 24 loads of 16 bytes in flight (a few blocks read fn at the rate their loads in flight
// allow). The 25 sums are reduced across the warp with shuffles (any warp size), then across the
// warps in shared memory. Warp 0 runs the 4 x 4 Sinkhorn, a lane an entry (split_sinkhorn), and
// publishes pre; the block then writes x. On NVIDIA from dim kClusterMinDim (Flash's 4096: fn is 1.5 MB, which one SM reads
// in about 10 us), a token is a cluster of kClusterBlocks blocks instead (mhc_pre_cluster_kernel):
// each sums an eighth of the values, block 0 adds the eight blocks' sums in rank order through
// distributed shared memory and runs the Sinkhorn, and each block writes an eighth of x. The
// variant follows dim alone, so a token's result does not depend on its batch.
//
// Mutants, compiled in only when the build defines one of them; the suite must catch each:
// DSV4H_MUTANT_SINKHORN_ONE_FEWER (one Sinkhorn pass fewer) and DSV4H_MUTANT_NOOP.
#include "mhc.h"

#include <cstdint>
#include <stdexcept>
#include <string>

#if defined(DSV4H_GPU_NVIDIA)
#include <cooperative_groups.h>
#endif

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

// Lane `src`'s `value`, in every lane of the warp (every lane must call it).
__device__ __forceinline__ double lane_value(double value, int src) {
#if defined(DSV4H_GPU_NVIDIA)
  return __shfl_sync(0xffffffffu, value, src);
#else
  return __shfl(value, src);
#endif
}

// pre, post and comb of token t from the block's sums (every lane of warp 0 calls it), in the
// reference's order: lane e < 16 holds comb[e / 4][e % 4] (the warp's other lanes repeat lanes
// 0-15), and each row or column sum gathers its four terms by shuffles and adds them in index
// order, so every value is the one a single thread's loops give, bit for bit. One thread did it
// before: its 640 serial fp64 divisions were most of the op's 54 us a token (tiny model, bs 1,
// H100); a pass is now one division a lane.
__device__ void split_sinkhorn(const MhcPreArgs& args, const double* sums, int64_t t, double* pre) {
  const int lane = static_cast<int>(threadIdx.x) % warpSize, e = lane % 16, row = e / kHcMult, col = e % kHcMult;
  const double eps = args.hc_eps;
  const double r = 1.0 / sqrt(sums[kHcMix] / static_cast<double>(kHcMult * args.dim) + args.norm_eps);
  const auto mix = [&](int k) { return sums[k] * r; };
  if (lane < kHcMult) {
    pre[lane] = sigmoid(mix(lane) * args.scale[0] + args.base[lane]) + eps;
  } else if (lane < 2 * kHcMult) {
    args.post[t * kHcMult + lane - kHcMult] = static_cast<float>(2.0 * sigmoid(mix(lane) * args.scale[1] + args.base[lane]));
  }
  const auto row_sum = [&](double v) {
    double sum = 0.0;
    for (int k = 0; k < kHcMult; ++k) sum += lane_value(v, row * kHcMult + k);
    return sum;
  };
  const auto column_sum = [&](double v) {
    double sum = 0.0;
    for (int k = 0; k < kHcMult; ++k) sum += lane_value(v, k * kHcMult + col);
    return sum;
  };
  // Row softmax, then eps, then the first column pass.
  const int logit = 2 * kHcMult + e;
  double c = mix(logit) * args.scale[2] + args.base[logit];
  double m = -INFINITY;
  for (int q = 0; q < kHcMult; ++q) m = fmax(m, lane_value(c, row * kHcMult + q));
  c = exp(c - m);
  c = c / row_sum(c) + eps;
  c /= column_sum(c) + eps;
#if defined(DSV4H_MUTANT_SINKHORN_ONE_FEWER)
  const int64_t passes = args.sinkhorn_iters - 1;
#else
  const int64_t passes = args.sinkhorn_iters;
#endif
  for (int64_t it = 1; it < passes; ++it) {  // rows then columns: ends on a column pass
    c /= row_sum(c) + eps;
    c /= column_sum(c) + eps;
  }
  if (lane < kHcMult * kHcMult) args.comb[(t * kHcMult + row) * kHcMult + col] = static_cast<float>(c);
}

// The 25 sums of a token's values [begin, end) of h (its 4 * dim = width values; begin and end
// multiples of 4, h 8-byte and fn 16-byte aligned), the block's threads strided over groups of four
// values, into sums[0..24]: each thread's, then each warp's by shuffles, then the warps' in order.
// Every thread of the block calls it; sums is complete on return.
__device__ void token_sums(const MhcPreArgs& args, const uint16_t* h, int64_t width, int64_t begin, int64_t end,
                           double (&warp_sums)[kSums][kMaxWarps], double* sums) {
  const int warps = kThreads / warpSize, warp = threadIdx.x / warpSize, lane = threadIdx.x % warpSize;
  double acc[kSums] = {};
  for (int64_t k = begin + 4 * threadIdx.x; k < end; k += 4 * kThreads) {
    const uint2 bits = *reinterpret_cast<const uint2*>(h + k);
    const auto value = [](uint32_t pair, int high) { return bf16_bits_to_double(static_cast<uint16_t>(pair >> (16 * high))); };
    const double v[4] = {value(bits.x, 0), value(bits.x, 1), value(bits.y, 0), value(bits.y, 1)};
    float4 f[kHcMix];
#pragma unroll
    for (int j = 0; j < kHcMix; ++j) f[j] = *reinterpret_cast<const float4*>(args.fn + j * width + k);
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[kHcMix] += v[i] * v[i];
#pragma unroll
    for (int j = 0; j < kHcMix; ++j) {
      acc[j] += static_cast<double>(f[j].x) * v[0];
      acc[j] += static_cast<double>(f[j].y) * v[1];
      acc[j] += static_cast<double>(f[j].z) * v[2];
      acc[j] += static_cast<double>(f[j].w) * v[3];
    }
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
}

// x's dims [begin, end) of token t: sum_i pre_i h_i, rounded once.
__device__ void write_x(const MhcPreArgs& args, const uint16_t* h, const double* pre, int64_t t, int64_t begin,
                        int64_t end) {
  for (int64_t k = begin + threadIdx.x; k < end; k += kThreads) {
    double y = 0.0;
    for (int i = 0; i < kHcMult; ++i) y += pre[i] * bf16_bits_to_double(h[i * args.dim + k]);
    args.x[t * args.dim + k] = bf16_from_double(y);
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
  for (int64_t t = blockIdx.x; t < args.tokens; t += gridDim.x) {
    const uint16_t* h = args.h + t * width;
    token_sums(args, h, width, 0, width, warp_sums, sums);
    if (threadIdx.x < warpSize) split_sinkhorn(args, sums, t, pre_shared);
    sync_block();
    write_x(args, h, pre_shared, t, 0, args.dim);
    sync_block();  // warp_sums, sums and pre_shared are reused by the next token
  }
}

#if defined(DSV4H_GPU_NVIDIA)
constexpr int kClusterBlocks = 8;
constexpr int64_t kClusterMinDim = 1024;

// A token a cluster of kClusterBlocks blocks (the file's header). Every block of a cluster takes
// the same tokens, so that the cluster's barriers match.
__global__ void __cluster_dims__(kClusterBlocks, 1, 1) __launch_bounds__(kThreads)
    mhc_pre_cluster_kernel(MhcPreArgs args) {
  schedule_point();
#if defined(DSV4H_MUTANT_NOOP)
  if (args.tokens >= 0) return;
#endif
  __shared__ double warp_sums[kSums][kMaxWarps];
  __shared__ double part[kSums];  // this block's sums over its eighth of the values
  __shared__ double sums[kSums];  // block 0's: the token's
  __shared__ double pre_shared[kHcMult];  // block 0's
  __shared__ double pre_local[kHcMult];   // every block's copy of it
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t width = kHcMult * args.dim;
  const int64_t values = ((width + kClusterBlocks - 1) / kClusterBlocks + 3) / 4 * 4;  // a block's share, whole fours
  const int64_t dims = (args.dim + kClusterBlocks - 1) / kClusterBlocks;     // and of x
  const auto bounded = [](int64_t v, int64_t bound) { return v < bound ? v : bound; };
  for (int64_t t = blockIdx.x / kClusterBlocks; t < args.tokens; t += gridDim.x / kClusterBlocks) {
    const uint16_t* h = args.h + t * width;
    token_sums(args, h, width, bounded(rank * values, width), bounded((rank + 1) * values, width), warp_sums, part);
    cluster.sync();  // every block's part is written
    if (rank == 0) {
      if (static_cast<int>(threadIdx.x) < kSums) {
        double s = 0.0;
        for (int r = 0; r < kClusterBlocks; ++r) s += cluster.map_shared_rank(part, r)[threadIdx.x];
        sums[threadIdx.x] = s;
      }
      sync_block();
      if (threadIdx.x < warpSize) split_sinkhorn(args, sums, t, pre_shared);
    }
    cluster.sync();  // pre is published, and block 0 has read every part
    if (static_cast<int>(threadIdx.x) < kHcMult)
      pre_local[threadIdx.x] = cluster.map_shared_rank(pre_shared, 0)[threadIdx.x];
    cluster.sync();  // block 0's pre is read by all, so block 0 may go on (or exit)
    write_x(args, h, pre_local, t, bounded(rank * dims, args.dim), bounded((rank + 1) * dims, args.dim));
    sync_block();  // the next token reuses warp_sums and pre_local
  }
}
#endif

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
  require(reinterpret_cast<uintptr_t>(args.h) % 8 == 0, "h must be 8-byte aligned (its values are read four at a time)");
  require(reinterpret_cast<uintptr_t>(args.fn) % 16 == 0, "fn must be 16-byte aligned (its values are read four at a time)");
  const int64_t blocks = args.tokens < 65536 ? args.tokens : 65536;
#if defined(DSV4H_GPU_NVIDIA)
  if (args.dim >= kClusterMinDim) {
    const int64_t clusters = args.tokens < 65536 / kClusterBlocks ? args.tokens : 65536 / kClusterBlocks;
    mhc_pre_cluster_kernel<<<static_cast<unsigned>(clusters * kClusterBlocks), kThreads, 0, stream>>>(args);
    DSV4H_LAUNCH_CHECK("mhc_pre_cluster_kernel");
    return;
  }
#endif
  mhc_pre_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args);
  DSV4H_LAUNCH_CHECK("mhc_pre_kernel");
}

}  // namespace dsv4h
