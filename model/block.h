// A decoder block's pieces besides attention (spec 2.1, 2.2, 2.5, 2.6) in fp64, one token row at a
// time: the mHC hyper-connections (hc_pre with its Sinkhorn-normalised combination, hc_post,
// the head's hc reduction) and the MoE (sqrt-softplus scores, bias top-k or hash routing, the
// route scale applied once, clamped SwiGLU experts, the shared expert).
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/op_observer.h"
#include "model/weights.h"

namespace dsv4h::model {

struct HcMix {
  Eigen::VectorXd pre, post;  // [hc]
  Eigen::MatrixXd comb;       // [hc, hc]: out_j = post_j x + sum_i comb(i, j) res_i
};

// The split of a mix vector [(2 + hc) * hc] into pre, post and the Sinkhorn-normalised comb.
HcMix hc_split_sinkhorn(const Eigen::VectorXd& mix, const Eigen::VectorXd& scale, const Eigen::VectorXd& base,
                        const ModelConfig& config);
// hc_pre: the streams h [hc * dim] reduced to one [dim]; `mix` receives what hc_post needs.
Eigen::VectorXd hc_pre(const Eigen::VectorXd& h, const Weights& w, const std::string& fn_prefix, const ModelConfig& config,
                       HcMix& mix);
Eigen::VectorXd hc_post(const Eigen::VectorXd& x, const Eigen::VectorXd& residual, const HcMix& mix, int64_t dim);
// hc_pre of every row of h [T, hc * dim]: x [T, dim], and what hc_post needs, post [T, hc] and
// comb [T, hc * hc] (row t, column i * hc + j holds comb(i, j): the mhc component's layout).
struct HcRows {
  RowMatrix x, post, comb;
  HcMix mix(int64_t t) const;
};
HcRows hc_pre_rows(const RowMatrix& h, const Weights& w, const std::string& fn_prefix, const ModelConfig& config);
RowMatrix hc_post_rows(const RowMatrix& x, const RowMatrix& residual, const HcRows& mix, int64_t dim);
// The head's reduction: sigmoid weights (no Sinkhorn) over the streams; `prefix` "" or "mtp.M.".
Eigen::VectorXd hc_head(const Eigen::VectorXd& h, const Weights& w, const std::string& prefix, const ModelConfig& config);

// The MoE's routing (spec 2.5), one token: the sqrt-softplus scores of the gate's logits; the top k
// of score + bias (the bias moves the choice only; ties to the lower expert id), in descending
// order; and the weights of the chosen experts, their scores normalised to sum 1. The route scale
// is not in them: moe_forward applies it once, to each expert's weight, as the GPU path's MoE
// combine does (kernels/moe_combine.hip).
Eigen::VectorXd sqrt_softplus_scores(const Eigen::VectorXd& logits);
std::vector<int64_t> biased_topk(const Eigen::VectorXd& scores, const Eigen::VectorXd& bias, int64_t k);
Eigen::VectorXd routing_weights(const Eigen::VectorXd& scores, const std::vector<int64_t>& chosen);

// One token's routing from its gate logits: the biased top-k, or in a hash layer tid2eid's experts.
struct Routing {
  std::vector<int64_t> ids;
  Eigen::VectorXd weights;  // without the route scale
};
Routing route(const ModelConfig& config, const Weights& w, int64_t layer, const std::string& prefix,
              const Eigen::VectorXd& logits, int64_t token_id);
// The routed experts' sum for one token, expert k weighted by weights(k) * route_scale.
// bf16_stages: each expert as expert_forward's.
Eigen::VectorXd routed_experts(const ModelConfig& config, const Weights& w, const std::string& prefix, const Eigen::VectorXd& x,
                               const std::vector<int64_t>& ids, const Eigen::VectorXd& weights, bool bf16_stages);

// The MoE of layer `layer` (weights under "layers.L.ffn." / "mtp.M.ffn.") for one token, its
// experts in fp64 throughout.
Eigen::VectorXd moe_forward(const ModelConfig& config, const Weights& w, int64_t layer, const std::string& prefix,
                            const Eigen::VectorXd& x, int64_t token_id);
// The MoE over rows x [T, dim], its ops reported as prefix + "gate" (logits [T, E]), "route" (ids
// and weights [T, k]), "experts" (the routed sum) and "shared" (the shared expert); returns their sum.
// bf16_stages: the experts as expert_forward's.
RowMatrix moe_rows(const ModelConfig& config, const Weights& w, int64_t layer, const std::string& prefix, const RowMatrix& x,
                   const std::vector<int64_t>& tokens, bool bf16_stages, OpObserver* observer);

// One expert's clamped SwiGLU: w2(clamp_up(w3 x) * silu(min(w1 x, limit))) * weight, the routing
// weight applied before w2 as DeepSeek's reference does. bf16_stages: w1 x and w3 x, then the
// activation, rounded to bf16 (ReferenceOptions::expert_bf16_stages), else all in fp64.
Eigen::VectorXd expert_forward(const Weights& w, const std::string& prefix, const Eigen::VectorXd& x, double swiglu_limit,
                               double weight, bool bf16_stages);

}  // namespace dsv4h::model
