#include "../../kernels/filtered_silu_mul.h"
#include "launchers.h"

namespace dsv4h {

void launch_filtered_silu_mul_case(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs,
                                   void* stream) {
  FilteredSiluMulArgs args;
  args.gate_up = inputs.data<const uint16_t>("gate_up");
  args.expert_ids = inputs.data<const int32_t>("expert_ids");
  args.out = outputs.data<uint16_t>("out");
  args.rows = c.integer("rows");
  args.inter = c.integer("inter");
  args.expert_step = c.integer("step");
  args.swiglu_limit = static_cast<float>(c.real("limit"));
  launch_filtered_silu_mul(args, static_cast<hipStream_t>(stream));
}

}  // namespace dsv4h
