// The GPU forward's FFN (forward_impl.h): gate, routing (hash or biased top-k), the filtered MoE
// once per simulated expert-parallel rank, the shared expert, their sum.
#include "forward_impl.h"

#include "glue_kernels.h"
#include "kernels/moe.h"
#include "kernels/moe_routing.h"

namespace dsv4h::model::gpu {

MoeRoutingArgs GpuForward::routing_args(int64_t layer, const std::string& p, const float* logits, const int32_t* tokens,
                                        int32_t* ids, float* weights, int64_t T) const {
  MoeRoutingArgs ra{};
  ra.logits = logits;
  ra.hash = layer < c_.n_hash_layers;
  ra.bias = ra.hash ? nullptr : f32(p + "gate.bias");
  ra.token_ids = tokens;
  ra.tid2eid = ra.hash ? weight(p + "gate.tid2eid").as<int32_t>() : nullptr;
  ra.topk_ids = ids;
  ra.topk_weights = weights;
  ra.tokens = T;
  ra.experts = c_.n_routed_experts;
  ra.topk = c_.n_activated_experts;
  ra.route_scale = c_.route_scale;
  return ra;
}

MoeArgs GpuForward::moe_args(const uint16_t* x, const int32_t* topk_ids, const float* topk_weights, int64_t T, int64_t slots,
                             const std::string& stack, int64_t first, int64_t local, float route_scale) const {
  const int64_t dim = c_.dim, I = c_.moe_inter_dim;
  MoeArgs m{};
  m.hidden = x;
  m.topk_ids = topk_ids;
  m.topk_weights = topk_weights;
  m.gate_up_weights = bf16(stack + ".gate_up") + first * 2 * I * dim;
  m.down_weights = bf16(stack + ".down") + first * dim * I;
  m.tokens = T;
  m.hidden_size = dim;
  m.inter = I;
  m.topk = slots;
  m.first_expert = first;
  m.local_experts = local;
  m.route_scale = route_scale;
  m.swiglu_limit = static_cast<float>(c_.swiglu_limit);
  return m;
}

GpuForward::Buf GpuForward::moe(int64_t layer, const std::string& p, const Buf& x, int64_t T, const Buf& tokens) const {
  const int64_t E = c_.n_routed_experts, k = c_.n_activated_experts, dim = c_.dim, I = c_.moe_inter_dim;
  const Buf logits = report_linear(x.as<uint16_t>(), T, p + "gate.weight", p + "gate", Dtype::f32, 1.f, "logits");
  Buf ids = device_array<int32_t>(T * k), weights = device_array<float>(T * k);
  if (T > 0)
    launch_moe_routing(routing_args(layer, p, logits.as<float>(), tokens.as<int32_t>(), ids.as<int32_t>(), weights.as<float>(), T),
                       stream_);
  report(p + "route", {{"ids", {ids.as<void>(), Dtype::i32, T, k, k}, OpValues::index},
                       {"weights", {weights.as<void>(), Dtype::f32, T, k, k}}});

  // The filtered MoE, once per simulated rank, and the shared expert: fp32 [T, dim] each.
  const auto run_moe = [&](const int32_t* topk_ids, const float* topk_weights, int64_t slots, const std::string& stack,
                           int64_t first, int64_t local, float route_scale, float* out) {
    Buf local_ids = device_array<int32_t>(T * slots), gate_up = device_array<uint16_t>(T * slots * 2 * I);
    Buf act = device_array<uint16_t>(T * slots * I), down = device_array<float>(T * slots * dim);
    MoeArgs m = moe_args(x.as<uint16_t>(), topk_ids, topk_weights, T, slots, stack, first, local, route_scale);
    m.local_ids = local_ids.as<int32_t>();
    m.gate_up = gate_up.as<uint16_t>();
    m.act = act.as<uint16_t>();
    m.down = down.as<float>();
    m.out = out;
    launch_moe(m, stream_);
    DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));  // the workspace is freed on return
  };
  Buf routed = device_array<float>(T * dim), partial = device_array<float>(T * dim);
  const int64_t R = options_.expert_ranks, local = E / R;
  for (int64_t rank = 0; rank < R; ++rank) {
    run_moe(ids.as<int32_t>(), weights.as<float>(), k, p + "routed", rank * local, local, static_cast<float>(c_.route_scale),
            rank == 0 ? routed.as<float>() : partial.as<float>());
    if (rank > 0) gpu::launch_accumulate(routed.as<float>(), partial.as<float>(), T * dim, stream_);
  }
  report(p + "experts", {{"y", {routed.as<void>(), Dtype::f32, T, dim, dim}}});
  const Buf zeros = upload(std::vector<int32_t>(static_cast<size_t>(std::max<int64_t>(T, 1)), 0));
  const Buf ones = upload(std::vector<float>(static_cast<size_t>(std::max<int64_t>(T, 1)), 1.f));
  Buf shared = device_array<float>(T * dim);
  run_moe(zeros.as<int32_t>(), ones.as<float>(), 1, p + "shared", 0, 1, 1.f, shared.as<float>());
  report(p + "shared", {{"y", {shared.as<void>(), Dtype::f32, T, dim, dim}}});
  Buf y = device_array<uint16_t>(T * dim);
  gpu::launch_sum_to_bf16(routed.as<float>(), shared.as<float>(), T * dim, y.as<uint16_t>(), stream_);
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
  return y;
}

}  // namespace dsv4h::model::gpu
