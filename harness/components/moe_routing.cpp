// Descriptor of `moe_routing`, the MoE's router (spec 2.5): sqrt-softplus scores of the gate logits,
// the top-k of score + bias (the bias for the choice only) or, in hash layers, the experts tid2eid
// lists for the token id; the weights normalised to sum 1. route_scale is applied once, by the MoE's
// combine (harness/components/moe.cpp, kernels/moe_combine.hip), not here: the model's reference
// applies it to each expert's weight (model/block.h). The reference is the model's own. One of the
// per-op checks the model's GPU forward is bisected with (issue 31).
//
// Checks: topk_ids exact, in order (descending score + bias, ties to the lower id; hash: tid2eid's
// order); topk_weights fp32_rounded_once. The kernel computes in fp64 and rounds the weights once,
// as the fp64 reference does, so they agree or are adjacent fp32 values. Exact ties (equal logits
// and biases, made on purpose by ties=1) give equal fp64 values on both sides and the same
// lower-id choice; distinct values closer than the two sides' fp64 libm differences (~1e-16
// relative) would be needed for the order to differ, which the seeded inputs never come near, so the
// ids are compared exactly rather than as sets.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "../../model/block.h"
#include "../descriptor.h"
#include "index_tensors.h"
#include "../errors.h"
#include "../random.h"
#if DSV4H_GPU_LAYER
#include "../../kernels/moe_routing.h"
#include "../gpu/device_tensor.h"
#endif

namespace dsv4h {
namespace {

struct Params {
  int64_t tokens = 7, experts = 8, topk = 2, hash = 0, vocab = 512, ties = 0;
  double route_scale = 1.5;
  template <typename F>
  void fields(F& f) {
    f("tokens", tokens, "token rows T");
    f("experts", experts, "n_routed_experts E: 8 tiny, 256 Flash, 384 Pro (at most 1024)");
    f("topk", topk, "n_activated_experts k: 2 tiny, 6 Flash and Pro (at most 16)");
    f("hash", hash, "1 = a hash layer: the experts are tid2eid[token id]");
    f("vocab", vocab, "rows of tid2eid (hash layers): 512 tiny, 129280 real");
    f("ties", ties, "1 = logits on a coarse grid and no bias: many exact ties, broken to the lower id");
    f("route_scale", route_scale, "route_scale (1.5 tiny and Flash, 2.5 Pro): the combine's; here only the mutant folds it in");
  }
};
using RoutingCase = CaseOf<Params>;

void check_sizes(const RoutingCase& c) {
  const auto bad = [&](const std::string& why) { return BadInput("moe_routing: " + why + " in " + c.str()); };
  if (c.tokens < 0) throw bad("tokens must be >= 0");
  if (c.experts < 1 || c.experts > 1024) throw bad("experts must be in [1, 1024]");
  if (c.topk < 1 || c.topk > 16 || c.topk > c.experts) throw bad("topk must be in [1, min(experts, 16)]");
  if (c.hash != 0 && c.hash != 1) throw bad("hash must be 0 or 1");
  if (c.ties != 0 && c.ties != 1) throw bad("ties must be 0 or 1");
  if (c.vocab < 1 || c.vocab > (1 << 20)) throw bad("vocab must be in [1, 2^20]");
  if (!(c.route_scale > 0 && c.route_scale <= 100)) throw bad("route_scale must be in (0, 100]");
  if (c.tokens > (int64_t{1} << 26) / c.experts) throw bad("tokens * experts above 2^26");
}

TensorMap make_inputs(const RoutingCase& c) {
  check_sizes(c);
  Rng rng(c.seed());
  HostTensor logits(DType::f32, {c.tokens, c.experts});
  if (c.ties) {
    for (int64_t i = 0; i < logits.numel(); ++i) logits.set(i, 0.5 * static_cast<double>(rng.integer(-4, 4)));
  } else {
    fill_normal(logits, rng, 0.0, 2.0);  // scores from about 0.1 to 2.5
  }
  if (c.hash) {
    HostTensor token_ids(DType::i32, {c.tokens}), table(DType::i32, {c.vocab, c.topk});
    fill_integers(token_ids, rng, 0, c.vocab - 1);
    for (int64_t v = 0; v < c.vocab; ++v) {  // k distinct experts per token id, in no particular order
      std::vector<int64_t> ids;
      while (static_cast<int64_t>(ids.size()) < c.topk) {
        const int64_t e = rng.integer(0, c.experts - 1);
        if (std::find(ids.begin(), ids.end(), e) == ids.end()) ids.push_back(e);
      }
      for (int64_t k = 0; k < c.topk; ++k) table.data<int32_t>()[v * c.topk + k] = static_cast<int32_t>(ids[k]);
    }
    return {{"logits", std::move(logits)}, {"token_ids", std::move(token_ids)}, {"tid2eid", std::move(table)}};
  }
  // A load-balancing bias of the size of the scores' spread, so that it moves the choice often.
  HostTensor bias(DType::f32, {c.experts});
  if (c.ties) fill_integers(bias, rng, 0, 0);
  else fill_normal(bias, rng, 0.0, 0.5);
  return {{"logits", std::move(logits)}, {"bias", std::move(bias)}};
}

void validate_inputs(const RoutingCase& c, const TensorMap& inputs) {
  check_sizes(c);
  require_tensor("moe_routing", inputs, "logits", DType::f32, {c.tokens, c.experts});
  if (c.hash) {
    require_tensor("moe_routing", inputs, "token_ids", DType::i32, {c.tokens});
    require_tensor("moe_routing", inputs, "tid2eid", DType::i32, {c.vocab, c.topk});
    const int32_t* ids = inputs.at("token_ids").data<int32_t>();
    for (int64_t t = 0; t < c.tokens; ++t)
      if (ids[t] < 0 || ids[t] >= c.vocab)
        throw BadInput("moe_routing: token_ids[" + std::to_string(t) + "] = " + std::to_string(ids[t]) + " outside [0, vocab)");
    const int32_t* table = inputs.at("tid2eid").data<int32_t>();
    for (int64_t i = 0; i < c.vocab * c.topk; ++i)
      if (table[i] < 0 || table[i] >= c.experts)
        throw BadInput("moe_routing: tid2eid[" + std::to_string(i / c.topk) + ", " + std::to_string(i % c.topk) +
                       "] = " + std::to_string(table[i]) + " outside [0, experts)");
  } else {
    require_tensor("moe_routing", inputs, "bias", DType::f32, {c.experts});
  }
  reject_unknown_inputs("moe_routing", inputs,
                        c.hash ? std::vector<std::string>{"logits", "token_ids", "tid2eid"} : std::vector<std::string>{"logits", "bias"});
}

TensorMap make_outputs(const RoutingCase& c) {
  check_sizes(c);
  return {{"topk_ids", HostTensor(DType::i32, {c.tokens, c.topk})},
          {"topk_weights", HostTensor(DType::f32, {c.tokens, c.topk})}};
}

void run_reference(const RoutingCase& c, const TensorMap& inputs, TensorMap& outputs) {
  const HostTensor& logits = inputs.at("logits");
  Eigen::VectorXd bias = Eigen::VectorXd::Zero(c.experts);
  if (!c.hash)
    for (int64_t e = 0; e < c.experts; ++e) bias(e) = inputs.at("bias").get(e);
  for (int64_t t = 0; t < c.tokens; ++t) {
    Eigen::VectorXd l(c.experts);
    for (int64_t e = 0; e < c.experts; ++e) l(e) = logits.get(t * c.experts + e);
    const Eigen::VectorXd scores = model::sqrt_softplus_scores(l);
    std::vector<int64_t> chosen;
    if (c.hash) {
      const int64_t id = inputs.at("token_ids").data<int32_t>()[t];
      for (int64_t k = 0; k < c.topk; ++k) chosen.push_back(inputs.at("tid2eid").data<int32_t>()[id * c.topk + k]);
    } else {
      chosen = model::biased_topk(scores, bias, c.topk);
    }
    const Eigen::VectorXd weights = model::routing_weights(scores, chosen);
    for (int64_t k = 0; k < c.topk; ++k) {
      outputs.at("topk_ids").data<int32_t>()[t * c.topk + k] = static_cast<int32_t>(chosen[static_cast<size_t>(k)]);
      outputs.at("topk_weights").set(t * c.topk + k, weights(k));
    }
  }
}

bool per_token(const std::string& input) { return input == "logits" || input == "token_ids"; }

// A captured batch is padded with more tokens (an engine's stale rows): seeded random ones here, so
// that they are checked like the real ones and show any token that leaks into another.
TensorMap pad_batch(const RoutingCase& c, const TensorMap& inputs, int64_t bucket) {
  if (bucket < c.tokens) throw BadInput("moe_routing: bucket " + std::to_string(bucket) + " < tokens");
  const Case padded_case = c.untyped().with("tokens", std::to_string(bucket)).with_seed(c.seed() ^ 0x9e3779b97f4a7c15ull);
  TensorMap padded = make_inputs(RoutingCase(padded_case));
  for (const auto& [name, t] : inputs) {
    if (per_token(name)) std::memcpy(padded.at(name).bytes(), t.bytes(), t.nbytes());
    else padded.at(name) = t;
  }
  return padded;
}

WorkCount work(const RoutingCase& c, const TensorMap&) {
  // Reads the logits (and bias or the table rows), writes ids and weights; exp, log1p, sqrt per
  // score (~30 flops) and k rounds of comparisons.
  const double n = static_cast<double>(c.tokens * c.experts);
  return {n * 4 + static_cast<double>(c.experts * 4 + c.tokens * c.topk * 8), n * (30 + 2 * static_cast<double>(c.topk))};
}

BatchSlice slice_batch(const RoutingCase& c, const TensorMap& inputs, int64_t begin, int64_t end) {
  TensorMap part;
  for (const auto& [name, t] : inputs) part[name] = per_token(name) ? t.rows(begin, end) : t;
  return {c.untyped().with("tokens", std::to_string(end - begin)), std::move(part),
          {{"topk_ids", begin}, {"topk_weights", begin}}};
}

#if DSV4H_GPU_LAYER
void launch(const RoutingCase& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream) {
  MoeRoutingArgs args{};
  args.logits = inputs.data<const float>("logits");
  if (c.hash) {
    args.token_ids = inputs.data<const int32_t>("token_ids");
    args.tid2eid = inputs.data<const int32_t>("tid2eid");
  } else {
    args.bias = inputs.data<const float>("bias");
  }
  args.topk_ids = outputs.data<int32_t>("topk_ids");
  args.topk_weights = outputs.data<float>("topk_weights");
  args.tokens = c.tokens;
  args.experts = c.experts;
  args.topk = c.topk;
  args.hash = c.hash != 0;
  args.route_scale = c.route_scale;
  launch_moe_routing(args, static_cast<hipStream_t>(stream));
}
#endif

}  // namespace

Component moe_routing_component() {
  Descriptor<Params> d;
  d.name = "moe_routing";
  d.summary = "MoE router: sqrt-softplus scores, bias top-k (bias for the choice only) or tid2eid hash, normalised weights";
  d.verify_cases = {
      // The tiny config (8 experts, top-2, layer 0 hashed), Flash (256, top-6, 1.5), Pro (384, top-6, 2.5).
      "moe_routing(tokens=1,experts=8,topk=2)",
      "moe_routing(tokens=37,experts=8,topk=2)",
      "moe_routing(tokens=37,experts=8,topk=2,hash=1,vocab=512)",
      "moe_routing(tokens=64,experts=256,topk=6)",
      "moe_routing(tokens=5,experts=256,topk=6,hash=1,vocab=129280)",
      "moe_routing(tokens=64,experts=384,topk=6,route_scale=2.5)",
      "moe_routing(tokens=300,experts=384,topk=6,route_scale=2.5,hash=1,vocab=1000)",
      // Exact ties broken to the lower id; sizes off the powers of two.
      "moe_routing(tokens=50,experts=256,topk=6,ties=1)",
      "moe_routing(tokens=9,experts=100,topk=16)",
      "moe_routing(tokens=70000,experts=3,topk=1)",
  };
  d.batch_param = "tokens";
  d.replay_case = "moe_routing(tokens=1,experts=256,topk=6)";
  d.mutants = {
      DSV4H_MUTANT(bias_in_weights, "moe_routing.hip", "the weights from score + bias: the bias is for the choice only"),
      DSV4H_MUTANT(routing_route_scale_twice, "moe_routing.hip", "route_scale folded into the routing weights: with the combine's, applied twice"),
  };
  d.make_inputs = make_inputs;
  d.validate_inputs = validate_inputs;
  d.make_outputs = make_outputs;
  d.reference = run_reference;
  d.pad_batch = pad_batch;
  d.work = work;
  d.slice_batch = slice_batch;
  d.relation_cases = {
      "batch_invariance(chunks=3):moe_routing(tokens=40,experts=256,topk=6)",
      "batch_invariance(chunks=3):moe_routing(tokens=40,experts=8,topk=2,hash=1)",
  };
#if DSV4H_GPU_LAYER
  d.gpu = launch;
#endif
  return erase(std::move(d));
}

}  // namespace dsv4h
