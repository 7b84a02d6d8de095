// GPU bindings of the components: unpack a case and its device tensors into a kernel's launch
// wrapper. One function per component, in launch_<component>.cpp.
#pragma once

#include "../component.h"
#include "../../kernels/kv_pool.h"
#include "device_tensor.h"

namespace dsv4h {

void launch_filtered_silu_mul_case(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs,
                                   void* stream);
void launch_attn_metadata_case(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream);
// The per-step update alone (build + copy into the buffers + tail reset), for the benchmark.
void launch_attn_metadata_update(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream);
void launch_mtp_expand_case(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream);

// memory_pool: the step launcher, and the pieces GPU tests compose steps from (layer by layer,
// batches interleaved). `translation_cache` is what only the pool_cached_loc mutant uses.
void launch_memory_pool_case(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream);
KvPoolSet memory_pool_device_pools(const Case& c, DeviceTensorMap& outputs, int32_t* translation_cache);
KvLayerStore memory_pool_layer(const Case& c, const DeviceTensorMap& inputs, int layer);

}  // namespace dsv4h
