// A kernel that does nothing: the floor against which decode-size launches are timed.
#pragma once

#include "kernels/portability.h"

namespace dsv4h {
void launch_empty_kernel(hipStream_t stream);
}  // namespace dsv4h
