// The batched decode step's launch sequence (decode_graph.h), but its attention layer
// (decode_attention.cpp): the step's metadata and store locations, the embedding, each block's mHC,
// norms and MoE, the head, and MTP block 0. Nothing here waits for the device, copies to or from
// the host, or allocates after the step's first run: the sequence is captured as it is.
//
// The model's own mutants (model/gpu/model_mutants.cmake), compiled in only under their
// DSV4H_MUTANT_* definition: MODEL_CACHED_TRANSLATION (review finding 5, spec 5.4) translates the
// store locations in the bucket's first run only and every later step, replays included, stores
// at those; MODEL_MTP_ZERO_PAD (finding 3) zero-pads the MTP block's input rows after the first.
#include "decode_graph.h"

#include "glue_kernels.h"
#include "kernels/kv_pool.h"
#include "kernels/mhc.h"
#include "kernels/moe.h"
#include "kernels/moe_routing.h"
#include "kernels/rms_norm.h"

namespace dsv4h::model::gpu {

namespace {

// `stream` waits for `event`. Spelled here, not in kernels/portability.h: a host call of the decode
// step alone, and a change there marks every component's kernels as changed since their GPU runs
// (report status).
void wait_for(hipStream_t stream, hipEvent_t event) {
#if defined(DSV4H_GPU_NVIDIA)
  DSV4H_HIP_CHECK(cudaStreamWaitEvent(stream, event, 0));
#else
  DSV4H_HIP_CHECK(hipStreamWaitEvent(stream, event, 0));
#endif
}

}  // namespace

void* GpuForward::step_linear(DecodeBucket& b, const void* x, int64_t rows, const std::string& weight_name, Dtype out, float alpha,
                              const std::string& op, const char* output) const {
  const int64_t n = shape(weight_name).at(0), k = shape(weight_name).at(1);
  void* y = out == Dtype::bf16 ? static_cast<void*>(b.take<uint16_t>(rows * n)) : static_cast<void*>(b.take<float>(rows * n));
  gemm(x, Dtype::bf16, k, bf16(weight_name), k, y, out, n, rows, k, n, alpha);
  if (!op.empty()) b.record(op, {{output, {y, out, rows, n, n}}});
  return y;
}

uint16_t* GpuForward::step_norm(DecodeBucket& b, const uint16_t* x, int64_t rows, int64_t dim, const std::string& weight_name,
                                const std::string& op) const {
  uint16_t* y = b.take<uint16_t>(rows * dim);
  launch_rms_norm({x, f32(weight_name), y, rows, dim, static_cast<float>(c_.norm_eps)}, stream_);
  b.record(op, {{"y", {y, Dtype::bf16, rows, dim, dim}}});
  return y;
}

uint16_t* GpuForward::step_embed(DecodeBucket& b, const int32_t* tokens, int64_t copies, const std::string& op) const {
  const int64_t B = b.rows(), dim = c_.dim;
  uint16_t* h = b.take<uint16_t>(B * copies * dim);
  gpu::launch_embed(bf16("embed.weight"), tokens, B, dim, copies, h, stream_);
  b.record(op, {{"h", {h, Dtype::bf16, B, copies * dim, copies * dim}}});
  return h;
}

uint16_t* GpuForward::step_moe(DecodeBucket& b, int64_t layer, const std::string& p, const uint16_t* x, const int32_t* tokens) const {
  const int64_t B = b.rows(), E = c_.n_routed_experts, k = c_.n_activated_experts, dim = c_.dim, I = c_.moe_inter_dim;
  // As the per-request forward (moe.cpp): the filtered MoE once per simulated rank, summed, and the
  // shared expert as a MoE of one expert that every token takes with weight 1.
  const auto run_moe = [&](const int32_t* topk_ids, const float* topk_weights, int64_t slots, const std::string& stack,
                           int64_t first, int64_t local, float route_scale, float* out, hipStream_t stream) {
    MoeArgs m = moe_args(x, topk_ids, topk_weights, B, slots, stack, first, local, route_scale);
    m.local_ids = b.take<int32_t>(B * slots);
    m.gate_up = b.take<uint16_t>(B * slots * 2 * I);
    m.act = b.take<uint16_t>(B * slots * I);
    m.down = b.take<float>(B * slots * dim);
    m.out = out;
    launch_moe(m, stream);
  };
  // The shared expert needs x alone: on side_stream_, forked here and joined before the sum, its
  // kernels run beside the gate GEMM, the routing and the routed experts instead of after them (at
  // bs 1 those leave SMs idle: the routing is one block, and at the Flash shapes each of the shared
  // expert's GEMMs is 128 blocks on a 132-SM card). The same kernels on the same buffers as on one
  // stream, so the same bits; its buffers are its own, and the MoE's kernels keep no global state.
  const int32_t* zeros = b.constant(std::vector<int32_t>(static_cast<size_t>(B), 0));
  const float* ones = b.constant(std::vector<float>(static_cast<size_t>(B), 1.f));
  float* shared = b.take<float>(B * dim);
  DSV4H_HIP_CHECK(hipEventRecord(forked_, stream_));
  wait_for(side_stream_, forked_);
  run_moe(zeros, ones, 1, p + "shared", 0, 1, 1.f, shared, side_stream_);
  DSV4H_HIP_CHECK(hipEventRecord(joined_, side_stream_));

  const float* logits = static_cast<const float*>(step_linear(b, x, B, p + "gate.weight", Dtype::f32, 1.f, p + "gate", "logits"));
  int32_t* ids = b.take<int32_t>(B * k);
  float* weights = b.take<float>(B * k);
  launch_moe_routing(routing_args(layer, p, logits, tokens, ids, weights, B), stream_);
  b.record(p + "route", {{"ids", {ids, Dtype::i32, B, k, k}, OpValues::index}, {"weights", {weights, Dtype::f32, B, k, k}}});
  float* routed = b.take<float>(B * dim);
  const int64_t R = options_.expert_ranks, local = E / R;
  for (int64_t rank = 0; rank < R; ++rank) {
    float* part = rank == 0 ? routed : b.take<float>(B * dim);
    run_moe(ids, weights, k, p + "routed", rank * local, local, static_cast<float>(c_.route_scale), part, stream_);
    if (rank > 0) gpu::launch_accumulate(routed, part, B * dim, stream_);
  }
  b.record(p + "experts", {{"y", {routed, Dtype::f32, B, dim, dim}}});
  b.record(p + "shared", {{"y", {shared, Dtype::f32, B, dim, dim}}});  // reported in the reference's order
  wait_for(stream_, joined_);
  uint16_t* y = b.take<uint16_t>(B * dim);
  gpu::launch_sum_to_bf16(routed, shared, B * dim, y, stream_);
  return y;
}

uint16_t* GpuForward::step_block(DecodeBucket& b, const BatchPools& pools, int64_t layer, const std::string& p, const uint16_t* h,
                                 const int32_t* tokens) const {
  const int64_t B = b.rows(), dim = c_.dim, hc = c_.hc_mult;
  struct Mix {
    uint16_t* x;
    float *post, *comb;
  };
  const auto pre = [&](const uint16_t* streams, const std::string& sub) {
    const Mix m{b.take<uint16_t>(B * dim), b.take<float>(B * hc), b.take<float>(B * hc * hc)};
    launch_mhc_pre(mhc_pre_args(p, sub, streams, m.x, m.post, m.comb, B), stream_);
    b.record(p + "hc_" + sub + ".pre", {{"x", {m.x, Dtype::bf16, B, dim, dim}},
                                        {"post", {m.post, Dtype::f32, B, hc, hc}},
                                        {"comb", {m.comb, Dtype::f32, B, hc * hc, hc * hc}}});
    return m;
  };
  const auto post = [&](const uint16_t* x, const uint16_t* residual, const Mix& m, const std::string& sub) {
    uint16_t* out = b.take<uint16_t>(B * hc * dim);
    launch_mhc_post({x, residual, m.post, m.comb, out, B, dim}, stream_);
    b.record(p + "hc_" + sub + ".post", {{"h", {out, Dtype::bf16, B, hc * dim, hc * dim}}});
    return out;
  };
  const Mix a = pre(h, "attn");
  const uint16_t* x = step_norm(b, a.x, B, dim, p + "attn_norm.weight", p + "attn_norm");
  const uint16_t* attn = step_attention(b, pools, layer, p + "attn.", x);
  const uint16_t* mid = post(attn, h, a, "attn");
  const Mix f = pre(mid, "ffn");
  const uint16_t* y = step_norm(b, f.x, B, dim, p + "ffn_norm.weight", p + "ffn_norm");
  const uint16_t* ffn = step_moe(b, layer, p + "ffn.", y, tokens);
  return post(ffn, mid, f, "ffn");
}

void GpuForward::step_head(DecodeBucket& b, const uint16_t* h, const std::string& p) const {
  const int64_t B = b.rows(), dim = c_.dim;
  uint16_t* x = b.take<uint16_t>(B * dim);
  gpu::launch_head_hc(h, f32(p + "hc_head_fn"), f32(p + "hc_head_scale"), f32(p + "hc_head_base"), B, c_.hc_mult, dim, c_.hc_eps,
                      c_.norm_eps, x, stream_);
  b.record(p + "head.hc", {{"x", {x, Dtype::bf16, B, dim, dim}}});
  const uint16_t* y = step_norm(b, x, B, dim, p + "norm.weight", p + "head.norm");
  step_linear(b, y, B, "head.weight", Dtype::f32, 1.f, p + "head.proj");
}

void GpuForward::step_prologue(DecodeBucket& b, const BatchPools& pools) const {
  b.rewind();
  const int64_t B = b.rows();
  // The step's metadata, built straight into the bucket's set from the input rows (the staging
  // set only gives the widths): the real count is read on the device.
  AttnMetadataUpdateArgs m{};
  m.req_to_token = pools.req_to_token.as<int32_t>();
  m.pool = pools.layout.requests;
  m.ctx = pools.layout.ctx;
  m.full_to_swa = pools.full_to_swa.as<int32_t>();
  m.full_slots = pools.full_slots();
  m.req_pool_indices = b.req_pool_indices.as<int32_t>();
  m.seq_lens = b.seq_lens.as<int32_t>();
  m.extend_lens = b.extend_lens.as<int32_t>();
  m.out_cache_loc = b.out_cache_loc.as<int32_t>();
  m.num_reqs = b.num_reqs.as<int32_t>();
  m.max_reqs = B;
  m.tokens_per_request = 1;
  m.row_repeat = 1;
  m.staging = {};
  m.staging.rows = B;
  m.staging.page_cols = b.meta.page_cols;
  m.staging.c128_cols = b.meta.c128_cols;
  m.staging.index_topk = b.meta.index_topk;
  m.num_rows = b.num_rows.as<int32_t>();
  m.buffers = b.meta;
  launch_attn_metadata_update(m, stream_);
  // The SWA store locations, translated once a step for every layer's store (spec 5.4).
  KvStepLocations loc{};
  loc.full_to_swa = pools.full_to_swa.as<int32_t>();
  loc.full_slots = pools.full_slots();
  loc.out_cache_loc = b.meta.raw_out_loc;
  loc.seq_lens = b.meta.seq_lens_casual;
  loc.tokens = B;
  loc.swa_out_loc = b.swa_out_loc.as<int32_t>();
  loc.c4_out_loc = b.c4_loc.as<int32_t>();
  loc.c128_out_loc = b.c128_loc.as<int32_t>();
#if defined(DSV4H_MUTANT_MODEL_CACHED_TRANSLATION)
  // The translation made by the bucket's first run and reused by every later step (spec 5.4's
  // cached_loc, frozen in the graph as a host-side cache would be).
  if (!b.translated) launch_kv_translate(loc, stream_);
  b.translated = true;
#else
  launch_kv_translate(loc, stream_);
#endif
}

void GpuForward::decode_step(DecodeBucket& b, const BatchPools& pools) const {
  step_prologue(b, pools);
  const int64_t B = b.rows(), hc = c_.hc_mult, dim = c_.dim;
  const int32_t* tokens = b.tokens.as<int32_t>();
  const uint16_t* h = step_embed(b, tokens, hc, "embed");
  for (int64_t l = 0; l < c_.n_layers; ++l) h = step_block(b, pools, l, "layers." + std::to_string(l) + ".", h, tokens);
  step_head(b, h, "");

  // MTP block 0 on every row: a row without a next token (its request's last) runs on token 0 and
  // is not reported; its store lands past the request's last position.
  b.in_mtp = true;
  const std::string p = "mtp.0.";
  const int32_t* next = b.next_tokens.as<int32_t>();
#if defined(DSV4H_MUTANT_MODEL_MTP_ZERO_PAD)
  // Review finding 3's padding (spec 7): the block's per-request input taken as one row and padded
  // to the step's rows with 0 (_pad_tensor_to_size(value=0)) instead of every row its own.
  const int32_t* zeros = b.constant(std::vector<int32_t>(static_cast<size_t>(B), 0));
  if (B > 1)
    DSV4H_HIP_CHECK(hipMemcpyAsync(b.next_tokens.as<int32_t>() + 1, zeros, static_cast<size_t>(B - 1) * sizeof(int32_t),
                                   hipMemcpyDeviceToDevice, stream_));
#endif
  const uint16_t* e = step_embed(b, next, 1, p + "embed");
  const uint16_t* en = step_norm(b, e, B, dim, p + "enorm.weight", p + "enorm");
  const uint16_t* e_proj = static_cast<const uint16_t*>(step_linear(b, en, B, p + "e_proj.weight", Dtype::bf16, 1.f, p + "e_proj"));
  const uint16_t* hn = step_norm(b, h, B * hc, dim, p + "hnorm.weight", p + "hnorm");
  b.ops.back().outputs[0].rows_per_request = hc;
  const uint16_t* h_proj = static_cast<const uint16_t*>(step_linear(b, hn, B * hc, p + "h_proj.weight", Dtype::bf16, 1.f, p + "h_proj"));
  b.ops.back().outputs[0].rows_per_request = hc;
  uint16_t* x = b.take<uint16_t>(B * hc * dim);
  gpu::launch_mtp_input(e_proj, h_proj, B, hc, dim, x, stream_);
  b.record(p + "input", {{"h", {x, Dtype::bf16, B, hc * dim, hc * dim}}});
  const uint16_t* out = step_block(b, pools, c_.n_layers, p, x, next);
  step_head(b, out, p);
  if (options_.in_step) options_.in_step(static_cast<void*>(stream_));
}

}  // namespace dsv4h::model::gpu
