// Launch wrapper of RMSNorm (spec 2.3): y = w * (x * rsqrt(mean(x^2) + eps)), bf16 rows in, fp32
// weight, computed in fp32 and rounded once to bf16.
#pragma once

#include <cstdint>

#include "portability.h"

namespace dsv4h {

// bf16 values travel as their raw 16-bit patterns so that no vendor bf16 type crosses this boundary.
struct RmsNormArgs {
  const uint16_t* x;     // [rows, dim] bf16
  const float* weight;   // [dim] fp32
  uint16_t* y;           // [rows, dim] bf16
  int64_t rows;
  int64_t dim;
  float eps;
};

// Throws (naming the field) on impossible sizes; enqueues one kernel on `stream`, no host sync.
void launch_rms_norm(const RmsNormArgs& args, hipStream_t stream);

}  // namespace dsv4h
