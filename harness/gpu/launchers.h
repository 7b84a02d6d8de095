// GPU bindings of the components: unpack a case and its device tensors into a kernel's launch
// wrapper. One function per component, in launch_<component>.cpp.
#pragma once

#include "../component.h"
#include "device_tensor.h"

namespace dsv4h {

void launch_filtered_silu_mul_case(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs,
                                   void* stream);
void launch_attn_metadata_case(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream);
// The per-step update alone (build + copy into the buffers + tail reset), for the benchmark.
void launch_attn_metadata_update(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream);
void launch_mtp_expand_case(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream);

}  // namespace dsv4h
