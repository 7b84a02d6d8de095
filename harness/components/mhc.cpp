// Descriptor of `mhc`, the mHC hyper-connections around each sub-layer (spec 2.2) with 4 residual
// streams: op=0 hc_pre (the mix, its Sinkhorn-normalised combination and the pre-weighted layer
// input; kernels/mhc_pre.hip), op=1 hc_post (the layer output written back into the streams;
// kernels/mhc_post.hip). The reference is the model's own (model/block.h). One of the per-op checks
// the model's GPU forward is bisected with (issue 31).
//
// Tolerances: the dtype defaults, elementwise: bf16_rounded_once for the streams and x,
// fp32_rounded_once for post and comb. Both kernels compute in fp64 and round each output once
// (kernels/mhc.h says why), as the fp64 reference does; their fp64 error (the 4 * dim-term dot
// products and 20 Sinkhorn passes, some 10^-13 relative even if the passes amplified it 1000-fold)
// is under 10^-5 of an fp32 ulp, so the two roundings agree or are adjacent, as the classes state.
#include <cmath>
#include <cstring>
#include <string>

#include "../../model/block.h"
#include "../descriptor.h"
#include "index_tensors.h"
#include "../errors.h"
#include "../random.h"
#if DSV4H_GPU_LAYER
#include "../../kernels/mhc.h"
#include "../gpu/device_tensor.h"
#endif

namespace dsv4h {
namespace {

constexpr int64_t kHc = 4, kMix = (2 + kHc) * kHc;

struct Params {
  int64_t op = 0, tokens = 7, dim = 256, iters = 20;
  double hc_eps = 1e-6, norm_eps = 1e-6, comb_scale = 4;
  template <typename F>
  void fields(F& f) {
    f("op", op, "0 = hc_pre (mix, Sinkhorn, pre-weighted input), 1 = hc_post (write back into the 4 streams)");
    f("tokens", tokens, "token rows T");
    f("dim", dim, "hidden size: 256 tiny, 4096 Flash, 7168 Pro");
    f("iters", iters, "hc_sinkhorn_iters (DeepSeek-V4: 20)");
    f("hc_eps", hc_eps, "hc_eps (DeepSeek-V4: 1e-6)");
    f("norm_eps", norm_eps, "norm_eps of the mix's rsqrt (DeepSeek-V4: 1e-6)");
    f("comb_scale", comb_scale, "scale[2], of the combination's logits: larger is farther from doubly stochastic");
  }
};
using MhcCase = CaseOf<Params>;

void check_sizes(const MhcCase& c) {
  const auto bad = [&](const std::string& why) { return BadInput("mhc: " + why + " in " + c.str()); };
  if (c.op != 0 && c.op != 1) throw bad("op must be 0 (hc_pre) or 1 (hc_post)");
  if (c.tokens < 0) throw bad("tokens must be >= 0");
  if (c.dim <= 0 || c.dim > (1 << 16)) throw bad("dim must be in [1, 2^16]");
  if (c.iters < 1 || c.iters > 1000) throw bad("iters must be in [1, 1000]");
  if (!(c.hc_eps >= 0 && c.hc_eps < 1)) throw bad("hc_eps must be in [0, 1)");
  if (!(c.norm_eps >= 0 && c.norm_eps < 1)) throw bad("norm_eps must be in [0, 1)");
  if (!(c.comb_scale >= 0 && c.comb_scale <= 100)) throw bad("comb_scale must be in [0, 100]");
  if (c.tokens > (int64_t{1} << 26) / (kHc * c.dim)) throw bad("tokens * 4 * dim above 2^26 elements");
}

model::ModelConfig hc_config(const MhcCase& c) {
  model::ModelConfig config;
  config.dim = c.dim;
  config.hc_mult = kHc;
  config.hc_sinkhorn_iters = c.iters;
  config.hc_eps = c.hc_eps;
  config.norm_eps = c.norm_eps;
  return config;
}

// Token rows of scales spread over two decades (the streams grow through the layers), each stream
// its own values.
HostTensor streams(Rng& rng, int64_t tokens, int64_t dim) {
  HostTensor h(DType::bf16, {tokens, kHc, dim});
  for (int64_t t = 0; t < tokens; ++t) {
    const double scale = std::exp(std::log(0.1) + std::log(100.0) * rng.uniform());
    for (int64_t k = 0; k < kHc * dim; ++k) h.set(t * kHc * dim + k, scale * rng.normal());
  }
  return h;
}

// scale and base as a trained layer might hold them: pre and post logits of order one, the
// combination's logits comb_scale times larger, so that Sinkhorn is still moving at its last pass.
void mix_weights(Rng& rng, double comb_scale, HostTensor& scale, HostTensor& base) {
  scale.set(0, 0.5 + 1.5 * rng.uniform());
  scale.set(1, 0.5 + 1.5 * rng.uniform());
  scale.set(2, comb_scale);
  fill_normal(base, rng, 0.0, 1.0);
}

Eigen::VectorXd vector_of(const HostTensor& t, int64_t begin, int64_t n) {
  Eigen::VectorXd v(n);
  for (int64_t i = 0; i < n; ++i) v(i) = t.get(begin + i);
  return v;
}

TensorMap make_inputs(const MhcCase& c) {
  check_sizes(c);
  Rng rng(c.seed());
  HostTensor scale(DType::f32, {3}), base(DType::f32, {kMix});
  if (c.op == 0) {
    HostTensor h = streams(rng, c.tokens, c.dim);
    HostTensor fn(DType::f32, {kMix, kHc * c.dim});
    fill_normal(fn, rng, 0.0, 1.0 / std::sqrt(static_cast<double>(kHc * c.dim)));  // mixes of order one
    mix_weights(rng, c.comb_scale, scale, base);
    return {{"h", std::move(h)}, {"fn", std::move(fn)}, {"scale", std::move(scale)}, {"base", std::move(base)}};
  }
  HostTensor x(DType::bf16, {c.tokens, c.dim});
  fill_normal(x, rng, 0.0, 1.0);
  HostTensor residual = streams(rng, c.tokens, c.dim);
  // post and comb as hc_pre makes them: the model's split of random mixes, rounded to fp32.
  mix_weights(rng, c.comb_scale, scale, base);
  const model::ModelConfig config = hc_config(c);
  HostTensor post(DType::f32, {c.tokens, kHc}), comb(DType::f32, {c.tokens, kHc, kHc});
  for (int64_t t = 0; t < c.tokens; ++t) {
    Eigen::VectorXd mix(kMix);
    for (int64_t j = 0; j < kMix; ++j) mix(j) = rng.normal();
    const model::HcMix m = model::hc_split_sinkhorn(mix, vector_of(scale, 0, 3), vector_of(base, 0, kMix), config);
    for (int64_t i = 0; i < kHc; ++i) {
      post.set(t * kHc + i, m.post(i));
      for (int64_t j = 0; j < kHc; ++j) comb.set((t * kHc + i) * kHc + j, m.comb(i, j));
    }
  }
  return {{"x", std::move(x)}, {"residual", std::move(residual)}, {"post", std::move(post)}, {"comb", std::move(comb)}};
}

struct Expected {
  std::string name;
  DType dtype;
  Shape shape;
};

std::vector<Expected> input_specs(const MhcCase& c) {
  if (c.op == 0)
    return {{"h", DType::bf16, {c.tokens, kHc, c.dim}}, {"fn", DType::f32, {kMix, kHc * c.dim}},
            {"scale", DType::f32, {3}}, {"base", DType::f32, {kMix}}};
  return {{"x", DType::bf16, {c.tokens, c.dim}}, {"residual", DType::bf16, {c.tokens, kHc, c.dim}},
          {"post", DType::f32, {c.tokens, kHc}}, {"comb", DType::f32, {c.tokens, kHc, kHc}}};
}

void validate_inputs(const MhcCase& c, const TensorMap& inputs) {
  check_sizes(c);
  std::vector<std::string> names;
  for (const Expected& e : input_specs(c)) {
    require_tensor("mhc", inputs, e.name, e.dtype, e.shape);
    names.push_back(e.name);
  }
  reject_unknown_inputs("mhc", inputs, names);
}

TensorMap make_outputs(const MhcCase& c) {
  check_sizes(c);
  if (c.op == 0)
    return {{"x", HostTensor(DType::bf16, {c.tokens, c.dim})},
            {"post", HostTensor(DType::f32, {c.tokens, kHc})},
            {"comb", HostTensor(DType::f32, {c.tokens, kHc, kHc})}};
  return {{"h", HostTensor(DType::bf16, {c.tokens, kHc, c.dim})}};
}

model::Tensor model_tensor(const HostTensor& t) {
  model::Tensor m{t.shape(), std::vector<double>(static_cast<size_t>(t.numel()))};
  for (int64_t i = 0; i < t.numel(); ++i) m.values[static_cast<size_t>(i)] = t.get(i);
  return m;
}

void run_reference(const MhcCase& c, const TensorMap& inputs, TensorMap& outputs) {
  const model::ModelConfig config = hc_config(c);
  const int64_t width = kHc * c.dim;
  if (c.op == 0) {
    model::Weights w;  // the sub-layer's three tensors, under the names model::hc_pre reads
    w.set("hc_fn", model_tensor(inputs.at("fn")));
    w.set("hc_scale", model_tensor(inputs.at("scale")));
    w.set("hc_base", model_tensor(inputs.at("base")));
    for (int64_t t = 0; t < c.tokens; ++t) {
      model::HcMix mix;
      const Eigen::VectorXd x = model::hc_pre(vector_of(inputs.at("h"), t * width, width), w, "hc", config, mix);
      for (int64_t k = 0; k < c.dim; ++k) outputs.at("x").set(t * c.dim + k, x(k));
      for (int64_t i = 0; i < kHc; ++i) {
        outputs.at("post").set(t * kHc + i, mix.post(i));
        for (int64_t j = 0; j < kHc; ++j) outputs.at("comb").set((t * kHc + i) * kHc + j, mix.comb(i, j));
      }
    }
    return;
  }
  for (int64_t t = 0; t < c.tokens; ++t) {
    model::HcMix mix;
    mix.post = vector_of(inputs.at("post"), t * kHc, kHc);
    mix.comb.resize(kHc, kHc);
    for (int64_t i = 0; i < kHc; ++i)
      for (int64_t j = 0; j < kHc; ++j) mix.comb(i, j) = inputs.at("comb").get((t * kHc + i) * kHc + j);
    const Eigen::VectorXd h = model::hc_post(vector_of(inputs.at("x"), t * c.dim, c.dim),
                                             vector_of(inputs.at("residual"), t * width, width), mix, c.dim);
    for (int64_t k = 0; k < width; ++k) outputs.at("h").set(t * width + k, h(k));
  }
}

// The per-token inputs of each op; the others (fn, scale, base) are the sub-layer's weights.
bool per_token(const std::string& input) { return input != "fn" && input != "scale" && input != "base"; }

// A captured batch is padded with more tokens (an engine's stale rows): seeded random ones here, so
// that they are checked like the real ones and show any token that leaks into another.
TensorMap pad_batch(const MhcCase& c, const TensorMap& inputs, int64_t bucket) {
  if (bucket < c.tokens) throw BadInput("mhc: bucket " + std::to_string(bucket) + " < tokens");
  const Case padded_case = c.untyped().with("tokens", std::to_string(bucket)).with_seed(c.seed() ^ 0x9e3779b97f4a7c15ull);
  TensorMap padded = make_inputs(MhcCase(padded_case));
  for (const auto& [name, t] : inputs) {
    if (per_token(name)) std::memcpy(padded.at(name).bytes(), t.bytes(), t.nbytes());
    else padded.at(name) = t;
  }
  return padded;
}

WorkCount work(const MhcCase& c, const TensorMap&) {
  const double n = static_cast<double>(c.tokens * c.dim);
  if (c.op == 0)  // reads the streams and fn, writes x: 25 products per stream value, 4 per output
    return {n * kHc * 2 + static_cast<double>(kMix * kHc * c.dim * 4) + n * 2, n * kHc * 2 * (kMix + 1) + n * 8};
  return {n * 2 + n * kHc * 4, n * kHc * 10};  // reads x and the streams, writes the streams; 5 products each
}

BatchSlice slice_batch(const MhcCase& c, const TensorMap& inputs, int64_t begin, int64_t end) {
  TensorMap part;
  for (const auto& [name, t] : inputs) part[name] = per_token(name) ? t.rows(begin, end) : t;
  std::map<std::string, int64_t> rows;
  for (const auto& [name, t] : make_outputs(c)) rows[name] = begin;
  return {c.untyped().with("tokens", std::to_string(end - begin)), std::move(part), std::move(rows)};
}

#if DSV4H_GPU_LAYER
void launch(const MhcCase& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream) {
  if (c.op == 0) {
    MhcPreArgs args;
    args.h = inputs.data<const uint16_t>("h");
    args.fn = inputs.data<const float>("fn");
    args.scale = inputs.data<const float>("scale");
    args.base = inputs.data<const float>("base");
    args.x = outputs.data<uint16_t>("x");
    args.post = outputs.data<float>("post");
    args.comb = outputs.data<float>("comb");
    args.tokens = c.tokens;
    args.dim = c.dim;
    args.sinkhorn_iters = c.iters;
    args.hc_eps = c.hc_eps;
    args.norm_eps = c.norm_eps;
    launch_mhc_pre(args, static_cast<hipStream_t>(stream));
    return;
  }
  MhcPostArgs args;
  args.x = inputs.data<const uint16_t>("x");
  args.residual = inputs.data<const uint16_t>("residual");
  args.post = inputs.data<const float>("post");
  args.comb = inputs.data<const float>("comb");
  args.h = outputs.data<uint16_t>("h");
  args.tokens = c.tokens;
  args.dim = c.dim;
  launch_mhc_post(args, static_cast<hipStream_t>(stream));
}
#endif

}  // namespace

Component mhc_component() {
  Descriptor<Params> d;
  d.name = "mhc";
  d.summary = "mHC hyper-connections, 4 streams: hc_pre (mix, 20-pass Sinkhorn, pre-weighted input) and hc_post";
  d.verify_cases = {
      // The tiny config (dim 256), Flash (4096) and Pro (7168); decode-sized and prefill-sized.
      "mhc(op=0,tokens=1,dim=256)",
      "mhc(op=0,tokens=37,dim=256)",
      "mhc(op=0,tokens=8,dim=4096)",
      "mhc(op=0,tokens=3,dim=7168)",
      "mhc(op=0,tokens=64,dim=256,comb_scale=8)",
      "mhc(op=0,tokens=5,dim=100,iters=3)",
      "mhc(op=1,tokens=1,dim=256)",
      "mhc(op=1,tokens=37,dim=256)",
      "mhc(op=1,tokens=8,dim=4096)",
      "mhc(op=1,tokens=3,dim=7168)",
      "mhc(op=1,tokens=9,dim=100)",
      "mhc(op=1,tokens=70000,dim=4)",
  };
  d.batch_param = "tokens";
  d.replay_case = "mhc(op=0,tokens=1,dim=256)";
  d.mutants = {
      DSV4H_MUTANT(sinkhorn_one_fewer, "mhc_pre.hip", "one Sinkhorn pass fewer than hc_sinkhorn_iters"),
      DSV4H_MUTANT(post_transposed, "mhc_post.hip", "hc_post sums comb[j][i] res_i: the combination transposed"),
  };
  d.make_inputs = make_inputs;
  d.validate_inputs = validate_inputs;
  d.make_outputs = make_outputs;
  d.reference = run_reference;
  d.pad_batch = pad_batch;
  d.work = work;
  d.slice_batch = slice_batch;
  d.relation_cases = {
      "batch_invariance(chunks=3):mhc(op=0,tokens=20,dim=256)",
      "batch_invariance(chunks=3):mhc(op=1,tokens=20,dim=256)",
  };
#if DSV4H_GPU_LAYER
  d.gpu = launch;
#endif
  return erase(std::move(d));
}

}  // namespace dsv4h
