// MoE routing of DeepSeek-V4 (spec 2.5), in fp64 with the weights rounded once to fp32 (as the
// mHC kernels, kernels/mhc.h: a few hundred scores per token, and the check stays exact):
//   s = sqrt(softplus(logits)); ids = top-k of s + bias (bias for the choice only), or the token's
//   row of tid2eid in hash layers; weights = s[ids] / sum(s[ids]). route_scale is the MoE combine's
//   (kernels/moe_combine.hip), applied there once.
//
// Design: one block per token (grid-stride over tokens). The threads compute the scores into
// shared memory, then k rounds of a block-wide argmax over score + bias (ties to the lower id, as
// the reference's sort) pick the experts in descending order, each taken out of the next rounds.
// One thread then normalises the k weights.
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

__device__ __forceinline__ double sqrt_softplus(double l) { return sqrt(l > 30.0 ? l : log1p(exp(l))); }

// Whether (value a, id ia) ranks before (value b, id ib).
__device__ __forceinline__ bool ranks_before(double a, int ia, double b, int ib) { return a > b || (a == b && ia < ib); }

__global__ void __launch_bounds__(kThreads) moe_routing_kernel(MoeRoutingArgs args) {
  schedule_point();
#if defined(DSV4H_MUTANT_NOOP)
  if (args.tokens >= 0) return;
#endif
  __shared__ double score[kMoeRoutingMaxExperts], biased[kMoeRoutingMaxExperts];
  __shared__ double best_value[kThreads];
  __shared__ int best_id[kThreads];
  __shared__ int chosen[kMoeRoutingMaxTopk];
  const int experts = static_cast<int>(args.experts), topk = static_cast<int>(args.topk);
  for (int64_t t = blockIdx.x; t < args.tokens; t += gridDim.x) {
    for (int e = threadIdx.x; e < experts; e += kThreads) {
      score[e] = sqrt_softplus(args.logits[t * experts + e]);
      biased[e] = args.hash ? 0.0 : score[e] + static_cast<double>(args.bias[e]);
    }
    sync_block();
    if (args.hash) {
      if (static_cast<int>(threadIdx.x) < topk)
        chosen[threadIdx.x] = args.tid2eid[static_cast<int64_t>(args.token_ids[t]) * topk + threadIdx.x];
    } else {
      for (int k = 0; k < topk; ++k) {
        double v = -INFINITY;
        int id = experts;
        for (int e = threadIdx.x; e < experts; e += kThreads)
          if (biased[e] != -INFINITY && ranks_before(biased[e], e, v, id)) v = biased[e], id = e;
        best_value[threadIdx.x] = v;
        best_id[threadIdx.x] = id;
        sync_block();
        for (int half = kThreads / 2; half > 0; half /= 2) {
          if (static_cast<int>(threadIdx.x) < half &&
              ranks_before(best_value[threadIdx.x + half], best_id[threadIdx.x + half], best_value[threadIdx.x],
                           best_id[threadIdx.x])) {
            best_value[threadIdx.x] = best_value[threadIdx.x + half];
            best_id[threadIdx.x] = best_id[threadIdx.x + half];
          }
          sync_block();
        }
        if (threadIdx.x == 0) {
          chosen[k] = best_id[0];
          biased[best_id[0]] = -INFINITY;  // out of the next rounds
        }
        sync_block();
      }
    }
    sync_block();
    if (threadIdx.x == 0) {
      double weight[kMoeRoutingMaxTopk], total = 0.0;
      for (int k = 0; k < topk; ++k) {
#if defined(DSV4H_MUTANT_BIAS_IN_WEIGHTS)
        weight[k] = score[chosen[k]] + (args.hash ? 0.0 : static_cast<double>(args.bias[chosen[k]]));
#else
        weight[k] = score[chosen[k]];
#endif
        total += weight[k];
      }
      for (int k = 0; k < topk; ++k) {
#if defined(DSV4H_MUTANT_ROUTING_ROUTE_SCALE_TWICE)
        const double w = weight[k] / total * args.route_scale;
#else
        const double w = weight[k] / total;
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
