// Graph capture at bucket sizes and replay at every batch size (see GpuBackend::graph_replay).
#pragma once

#include "../gpu_backend.h"
#include "device_tensor.h"

namespace dsv4h {

ReplayResult run_graph_replay(GpuBackend& eager, hipStream_t stream, const Component& component, const Case& base,
                              const ReplayOptions& options);

}  // namespace dsv4h
