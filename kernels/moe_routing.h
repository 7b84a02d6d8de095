// Launch wrapper of the MoE routing (spec 2.5): sqrt-softplus scores of the gate logits, the top k
// of score + bias (or, in hash layers, the experts tid2eid lists for the token id), and the routing
// weights: the chosen scores normalised to sum 1. route_scale is not applied here: the MoE's
// combine applies it, once (kernels/moe_combine.hip); the args carry it for a mutant only.
#pragma once

#include <cstdint>

#include "portability.h"

namespace dsv4h {

constexpr int kMoeRoutingMaxExperts = 1024;
constexpr int kMoeRoutingMaxTopk = 16;

struct MoeRoutingArgs {
  const float* logits;     // [tokens, experts]: x @ gate^T
  const float* bias;       // [experts], selection only; unused in hash layers
  const int32_t* token_ids;  // [tokens], hash layers only
  const int32_t* tid2eid;    // [vocab, topk], hash layers only
  int32_t* topk_ids;       // [tokens, topk]: by descending score + bias (ties: lower id); hash: tid2eid's order
  float* topk_weights;     // [tokens, topk]
  int64_t tokens, experts, topk;
  bool hash;
  double route_scale;      // read only by DSV4H_MUTANT_ROUTING_ROUTE_SCALE_TWICE
};

// Throws (naming the field) on impossible sizes; enqueues one kernel on `stream`, no host sync.
void launch_moe_routing(const MoeRoutingArgs& args, hipStream_t stream);

}  // namespace dsv4h
