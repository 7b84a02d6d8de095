// GPU launch pieces that tests and benchmarks call directly, beside the components' own launchers
// (Component::gpu): the metadata update without its consumer, and the memory pool's parts that
// GPU tests compose steps from (layer by layer, batches interleaved).
#pragma once

#include "../component.h"
#include "../../kernels/kv_pool.h"
#include "device_tensor.h"

namespace dsv4h {

// attn_metadata's per-step update alone (build + copy into the buffers + tail reset), for the benchmark.
void launch_attn_metadata_update(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream);

// memory_pool: the step launcher and its pieces. `translation_cache` is what only the
// pool_cached_loc mutant uses.
void launch_memory_pool_case(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream);
KvPoolSet memory_pool_device_pools(const Case& c, DeviceTensorMap& outputs, int32_t* translation_cache);
KvLayerStore memory_pool_layer(const Case& c, const DeviceTensorMap& inputs, int layer);

}  // namespace dsv4h
