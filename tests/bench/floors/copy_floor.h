// A floor for kernels that move bytes: a plain copy kernel, timed beside the driver's
// device-to-device copy of the same bytes. A copy node in a graph is not the fastest way to move a
// few MB (on the H200 the MTP expansion of bs 256, topk 4 beat the copy node of its bytes:
// reports/gpu/2026-12-04-5095ac5-h200.json), so a goal is judged against the faster of the two.
#pragma once

#include <cstddef>

#include "kernels/portability.h"

namespace dsv4h {
// Copies `bytes` from `src` to `dst` (both 16-byte aligned; the ranges must not overlap) in one
// launch: 16-byte loads and stores, four a thread in flight, coalesced.
void launch_copy_floor(void* dst, const void* src, size_t bytes, hipStream_t stream);
}  // namespace dsv4h
