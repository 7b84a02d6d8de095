// The GPU forward's decoder block, embedding and head (forward_impl.h): mHC pre and post around
// attention and the FFN, the embedding's row gather, the head's hc reduction, norm and projection.
#include "forward_impl.h"

#include "glue_kernels.h"
#include "kernels/mhc.h"

namespace dsv4h::model::gpu {

MhcPreArgs GpuForward::mhc_pre_args(const std::string& p, const std::string& sub, const uint16_t* streams, uint16_t* x,
                                    float* post, float* comb, int64_t T) const {
  MhcPreArgs a{};
  a.h = streams;
  a.fn = f32(p + "hc_" + sub + "_fn");
  a.scale = f32(p + "hc_" + sub + "_scale");
  a.base = f32(p + "hc_" + sub + "_base");
  a.x = x;
  a.post = post;
  a.comb = comb;
  a.tokens = T;
  a.dim = c_.dim;
  a.sinkhorn_iters = c_.hc_sinkhorn_iters;
  a.hc_eps = c_.hc_eps;
  a.norm_eps = c_.norm_eps;
  return a;
}

GpuForward::Buf GpuForward::embed(const std::vector<int64_t>& tokens, int64_t copies, const std::string& op) const {
  const int64_t T = static_cast<int64_t>(tokens.size()), dim = c_.dim;
  std::vector<int32_t> ids(tokens.begin(), tokens.end());
  const Buf d_ids = upload(ids);
  Buf h = device_array<uint16_t>(T * copies * dim);
  gpu::launch_embed(bf16("embed.weight"), d_ids.as<int32_t>(), T, dim, copies, h.as<uint16_t>(), stream_);
  report(op, {{"h", {h.as<void>(), Dtype::bf16, T, copies * dim, copies * dim}}});
  return h;
}

GpuForward::Buf GpuForward::block(int64_t layer, const std::string& p, const Buf& h, int64_t T, const Buf& tokens,
                                  LayerState& cache) const {
  const int64_t dim = c_.dim, hc = c_.hc_mult;
  struct Mix {
    Buf x, post, comb;
  };
  const auto pre = [&](const Buf& streams, const std::string& sub) {
    Mix m{device_array<uint16_t>(T * dim), device_array<float>(T * hc), device_array<float>(T * hc * hc)};
    launch_mhc_pre(mhc_pre_args(p, sub, streams.as<uint16_t>(), m.x.as<uint16_t>(), m.post.as<float>(), m.comb.as<float>(), T),
                   stream_);
    report(p + "hc_" + sub + ".pre", {{"x", {m.x.as<void>(), Dtype::bf16, T, dim, dim}},
                                      {"post", {m.post.as<void>(), Dtype::f32, T, hc, hc}},
                                      {"comb", {m.comb.as<void>(), Dtype::f32, T, hc * hc, hc * hc}}});
    return m;
  };
  const auto post = [&](const Buf& x, const Buf& residual, const Mix& m, const std::string& sub) {
    Buf out = device_array<uint16_t>(T * hc * dim);
    launch_mhc_post({x.as<uint16_t>(), residual.as<uint16_t>(), m.post.as<float>(), m.comb.as<float>(), out.as<uint16_t>(), T, dim},
                    stream_);
    report(p + "hc_" + sub + ".post", {{"h", {out.as<void>(), Dtype::bf16, T, hc * dim, hc * dim}}});
    return out;
  };
  const Mix a = pre(h, "attn");
  const Buf x = report_norm(a.x.as<uint16_t>(), T, dim, p + "attn_norm.weight", p + "attn_norm");
  const bool prefill = cache.length == 0;
  const Buf attn = attention(layer, p + "attn.", x, T, cache, prefill);
  const Buf mid = post(attn, h, a, "attn");
  const Mix f = pre(mid, "ffn");
  const Buf y = report_norm(f.x.as<uint16_t>(), T, dim, p + "ffn_norm.weight", p + "ffn_norm");
  const Buf ffn = moe(layer, p + "ffn.", y, T, tokens);
  return post(ffn, mid, f, "ffn");
}

GpuForward::Buf GpuForward::head(const Buf& h, int64_t T, const std::string& p) const {
  const int64_t dim = c_.dim;
  Buf x = device_array<uint16_t>(T * dim);
  gpu::launch_head_hc(h.as<uint16_t>(), f32(p + "hc_head_fn"), f32(p + "hc_head_scale"), f32(p + "hc_head_base"), T, c_.hc_mult, dim,
                      c_.hc_eps, c_.norm_eps, x.as<uint16_t>(), stream_);
  report(p + "head.hc", {{"x", {x.as<void>(), Dtype::bf16, T, dim, dim}}});
  const Buf y = report_norm(x.as<uint16_t>(), T, dim, p + "norm.weight", p + "head.norm");
  return report_linear(y.as<uint16_t>(), T, "head.weight", p + "head.proj", Dtype::f32);
}

}  // namespace dsv4h::model::gpu
