// MoE routing of DeepSeek-V4 (spec 2.5), in fp64 with the weights rounded once to fp32 (as the
// mHC kernels, kernels/mhc.h: a few hundred scores per token, and the check stays exact):
//   s = sqrt(softplus(logits)); ids = top-k of s + bias (bias for the choice only), or the token's
//   row of tid2eid in hash layers; weights = s[ids] / sum(s[ids]). route_scale is the MoE combine's
//   (kernels/moe_combine.hip), applied there once.
//
// Design: one block per token (grid-stride over tokens). The threads compute the scores into
// shared memory and keep score + bias of their own experts (e = thread, thread + 256, ...) in
// registers; then k rounds of a block-wide argmax over score + bias (ties to the lower id, as the
// reference's sort) pick the experts in descending order, each taken out of the next rounds by
// the thread that holds it. A round is each thread's best, each warp's by a shuffle butterfly, and
// the warps' through shared memory, read by every thread alike: one barrier a round, where a tree
// over the block's threads in shared memory took ten (the Flash decode step's routing node, one
// token: 7.9 us on an H100, reports/gpu/2026-12-08-d6cdbd9-h100-flash-ab.json's per-node table).
// The argmax of a total order is one element however it is reduced, so the picks are those of the
// tree. One thread then normalises the k weights.
//
// Mutants, compiled in only when the build defines one of them; the suite must catch each:
// DSV4H_MUTANT_BIAS_IN_WEIGHTS (weights from score + bias), DSV4H_MUTANT_ROUTING_ROUTE_SCALE_TWICE
// (route_scale folded into the weights: with the combine's, applied twice) and DSV4H_MUTANT_NOOP.
#include "moe_routing.h"

#include <stdexcept>
#include <string>

namespace dsv4h {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxWarps = kThreads / 32;                                  // 64-lane wavefronts: half of them
constexpr int kExpertsPerThread = kMoeRoutingMaxExperts / kThreads;     // a thread's experts, at most
static_assert(kMoeRoutingMaxExperts % kThreads == 0, "every expert has a thread");

__device__ __forceinline__ double sqrt_softplus(double l) { return sqrt(l > 30.0 ? l : log1p(exp(l))); }

// Whether (value a, id ia) ranks before (value b, id ib).
__device__ __forceinline__ bool ranks_before(double a, int ia, double b, int ib) { return a > b || (a == b && ia < ib); }

template <typename T>
__device__ __forceinline__ T shuffle_xor(T value, int mask) {
#if defined(DSV4H_GPU_NVIDIA)
  return __shfl_xor_sync(0xffffffffu, value, mask);
#else
  return __shfl_xor(value, mask);
#endif
}

// The best (value, id) of the warp's lanes, in every lane (every lane must call it).
__device__ __forceinline__ void warp_best(double& value, int& id) {
  for (int mask = warpSize / 2; mask > 0; mask /= 2) {
    const double other = shuffle_xor(value, mask);
    const int other_id = shuffle_xor(id, mask);
    if (ranks_before(other, other_id, value, id)) value = other, id = other_id;
  }
}

__global__ void __launch_bounds__(kThreads) moe_routing_kernel(MoeRoutingArgs args) {
  schedule_point();
#if defined(DSV4H_MUTANT_NOOP)
  if (args.tokens >= 0) return;
#endif
  __shared__ double score[kMoeRoutingMaxExperts];
  __shared__ double warp_value[2][kMaxWarps];  // by round parity: a round writes one while the last may still be read
  __shared__ int warp_id[2][kMaxWarps];
  __shared__ int chosen[kMoeRoutingMaxTopk];
  const int experts = static_cast<int>(args.experts), topk = static_cast<int>(args.topk);
  const int tid = static_cast<int>(threadIdx.x), warps = kThreads / warpSize, warp = tid / warpSize;
  for (int64_t t = blockIdx.x; t < args.tokens; t += gridDim.x) {
    double biased[kExpertsPerThread];  // score + bias of experts tid + j kThreads; -inf: chosen, past experts, or hash
#pragma unroll
    for (int j = 0; j < kExpertsPerThread; ++j) {
      const int e = tid + j * kThreads;
      biased[j] = -INFINITY;
      if (e < experts) {
        score[e] = sqrt_softplus(args.logits[t * experts + e]);
        if (!args.hash) biased[j] = score[e] + static_cast<double>(args.bias[e]);
      }
    }
    if (args.hash) {
      if (tid < topk) chosen[tid] = args.tid2eid[static_cast<int64_t>(args.token_ids[t]) * topk + tid];
    } else {
      for (int k = 0; k < topk; ++k) {
        double v = -INFINITY;
        int id = experts;
#pragma unroll
        for (int j = 0; j < kExpertsPerThread; ++j) {
          const int e = tid + j * kThreads;
          if (biased[j] != -INFINITY && ranks_before(biased[j], e, v, id)) v = biased[j], id = e;
        }
        warp_best(v, id);
        if (tid % warpSize == 0) warp_value[k % 2][warp] = v, warp_id[k % 2][warp] = id;
        sync_block();
        v = warp_value[k % 2][0], id = warp_id[k % 2][0];
        for (int w = 1; w < warps; ++w)
          if (ranks_before(warp_value[k % 2][w], warp_id[k % 2][w], v, id)) v = warp_value[k % 2][w], id = warp_id[k % 2][w];
        if (tid == 0) chosen[k] = id;
#pragma unroll
        for (int j = 0; j < kExpertsPerThread; ++j)
          if (id == tid + j * kThreads) biased[j] = -INFINITY;  // out of the next rounds
      }
    }
    sync_block();  // score and chosen are complete
    if (threadIdx.x == 0) {
      // Read twice rather than kept in an array a thread indexes at run time (local memory).
      const auto weight = [&](int k) {
#if defined(DSV4H_MUTANT_BIAS_IN_WEIGHTS)
        return score[chosen[k]] + (args.hash ? 0.0 : static_cast<double>(args.bias[chosen[k]]));
#else
        return score[chosen[k]];
#endif
      };
      double total = 0.0;
      for (int k = 0; k < topk; ++k) total += weight(k);
      for (int k = 0; k < topk; ++k) {
#if defined(DSV4H_MUTANT_ROUTING_ROUTE_SCALE_TWICE)
        const double w = weight(k) / total * args.route_scale;
#else
        const double w = weight(k) / total;
#endif
        args.topk_ids[t * topk + k] = chosen[k];
        args.topk_weights[t * topk + k] = static_cast<float>(w);
      }
    }
    sync_block();  // the shared arrays are reused by the next token
  }
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("moe_routing: " + message);
}

}  // namespace

void launch_moe_routing(const MoeRoutingArgs& args, hipStream_t stream) {
  require(args.tokens >= 0, "tokens must be >= 0, got " + std::to_string(args.tokens));
  require(args.experts > 0 && args.experts <= kMoeRoutingMaxExperts,
          "experts must be in [1, " + std::to_string(kMoeRoutingMaxExperts) + "], got " + std::to_string(args.experts));
  require(args.topk > 0 && args.topk <= kMoeRoutingMaxTopk && args.topk <= args.experts,
          "topk must be in [1, min(experts, " + std::to_string(kMoeRoutingMaxTopk) + ")], got " + std::to_string(args.topk));
  if (args.tokens == 0) return;
  require(args.logits && args.topk_ids && args.topk_weights, "null device pointer");
  require(args.hash ? args.token_ids && args.tid2eid : args.bias != nullptr, "null device pointer");
  const int64_t blocks = args.tokens < 65536 ? args.tokens : 65536;
  moe_routing_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args);
  DSV4H_LAUNCH_CHECK("moe_routing_kernel");
}

}  // namespace dsv4h
