// The list of components and the hook that gives them GPU launchers. registry.cpp calls both;
// gpu/launchers.cpp (GPU builds) or no_gpu.cpp (CPU build) defines the hook.
#pragma once

#include "../component.h"

namespace dsv4h {

Component filtered_silu_mul_component();
Component attn_metadata_component();
Component mtp_expand_component();
Component memory_pool_component();

void attach_gpu_launchers(Registry& registry);

}  // namespace dsv4h
