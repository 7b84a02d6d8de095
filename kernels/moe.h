// Launch wrappers of the filtered MoE of one expert-parallel rank (spec 8.1-8.3): the local ids,
// GEMM1 (gate_up), the filtered activation (filtered_silu_mul.h), GEMM2 (down, times the routed
// weight) and the combine. launch_moe enqueues the whole layer; the model's forward calls it once
// per MoE layer and all-reduces `out` over the ranks.
#pragma once

#include <cstdint>

#include "portability.h"

namespace dsv4h {

// bf16 values travel as their raw 16-bit patterns. Rows of the per-slot buffers are
// `token * topk + slot`.
struct MoeArgs {
  const uint16_t* hidden;           // [tokens, hidden] bf16
  const int32_t* topk_ids;          // [tokens, topk] global expert ids; -1 = padded token
  const float* topk_weights;        // [tokens, topk]
  const uint16_t* gate_up_weights;  // [local_experts, 2 inter, hidden] bf16: the rank's experts only
  const uint16_t* down_weights;     // [local_experts, hidden, inter] bf16
  // Workspace, every element of which the layer writes or deliberately leaves (act's filtered rows):
  int32_t* local_ids;               // [tokens * topk]: global id - first_expert where local, else -1
  uint16_t* gate_up;                // [tokens * topk, 2 inter] bf16; zeros on filtered rows
  uint16_t* act;                    // [tokens * topk, inter] bf16; filtered rows neither read nor written
  float* down;                      // [tokens * topk, hidden]; zeros on filtered rows
  float* out;                       // [tokens, hidden]: route_scale * sum over slots, the rank's partial;
                                    // until the combine, the rows' grouping by expert (moe_grouping.h):
                                    // it overlaps no other buffer of these arguments, and nothing
                                    // writes it between launch_moe_local_ids and launch_moe_combine
  int64_t tokens, hidden_size, inter, topk;
  int64_t first_expert;             // r * local_experts
  int64_t local_experts;            // E / R
  float route_scale;                // applied once, by the combine (spec 2.5)
  float swiglu_limit;               // DeepSeek-V4: 10
};

// Each throws std::invalid_argument naming the field on impossible sizes and enqueues one kernel on
// `stream`, no host sync; launch_moe enqueues the five in order. GEMM1 and GEMM2 read the grouping
// that launch_moe_local_ids writes (on NVIDIA, where moe_grouping.h says): enqueue them after it.
void launch_moe(const MoeArgs& args, hipStream_t stream);
void launch_moe_local_ids(const MoeArgs& args, hipStream_t stream);
void launch_moe_gate_up(const MoeArgs& args, hipStream_t stream);
void launch_moe_down(const MoeArgs& args, hipStream_t stream);
void launch_moe_combine(const MoeArgs& args, hipStream_t stream);

// Throws std::invalid_argument naming the field where the sizes or pointers are impossible.
void check_moe_args(const MoeArgs& args);

// The largest hidden and inter the GEMMs take: a block of the scalar GEMMs stages one row of its
// input (hidden for GEMM1, inter for GEMM2) in shared memory as fp32.
constexpr int64_t kMoeMaxRowWidth = 8192;

}  // namespace dsv4h
