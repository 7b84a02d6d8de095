// Launch wrapper of the expert-filtered SwiGLU activation of the fused MoE (spec section 8.2).
#pragma once

#include <cstdint>

#include "portability.h"

namespace dsv4h {

// bf16 values travel as their raw 16-bit patterns so that no vendor bf16 type crosses this boundary.
struct FilteredSiluMulArgs {
  const uint16_t* gate_up;     // [rows, 2 * inter] bf16: gate = columns [0, inter), up = [inter, 2 * inter)
  const int32_t* expert_ids;   // [ceil(rows / expert_step)]; -1 = filtered, the rows are neither read nor written
  uint16_t* out;               // [rows, inter] bf16
  int64_t rows;
  int64_t inter;
  int64_t expert_step;         // rows per expert id: 1 (per token slot) or BLOCK_M (expert-sorted blocks)
  float swiglu_limit;          // gate = min(g, L), up = clamp(u, -L, L); 0 = no clamp
};

// Throws (naming the field) on impossible sizes; enqueues one kernel on `stream`, no host sync.
void launch_filtered_silu_mul(const FilteredSiluMulArgs& args, hipStream_t stream);

}  // namespace dsv4h
