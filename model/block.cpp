#include "block.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "reference/filtered_silu_mul.h"
#include "reference/narrow_float.h"

namespace dsv4h::model {
namespace {

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

// xf @ fn^T scaled by the rsqrt of xf's mean square (the mixes of hc_pre and hc_head).
Eigen::VectorXd mixes(const Eigen::VectorXd& h, const Eigen::Ref<const RowMatrix>& fn, double eps) {
  const double r = 1 / std::sqrt(h.squaredNorm() / static_cast<double>(h.size()) + eps);
  return fn * h * r;
}

Eigen::VectorXd weighted_streams(const Eigen::VectorXd& h, const Eigen::VectorXd& pre, int64_t dim) {
  Eigen::VectorXd y = Eigen::VectorXd::Zero(dim);
  for (int64_t i = 0; i < pre.size(); ++i) y += pre(i) * h.segment(i * dim, dim);
  return y;
}

}  // namespace

HcMix hc_split_sinkhorn(const Eigen::VectorXd& mix, const Eigen::VectorXd& scale, const Eigen::VectorXd& base,
                        const ModelConfig& c) {
  const int64_t hc = c.hc_mult;
  const double eps = c.hc_eps;
  HcMix out;
  out.pre.resize(hc);
  out.post.resize(hc);
  for (int64_t i = 0; i < hc; ++i) {
    out.pre(i) = sigmoid(mix(i) * scale(0) + base(i)) + eps;
    out.post(i) = 2 * sigmoid(mix(hc + i) * scale(1) + base(hc + i));
  }
  Eigen::MatrixXd C(hc, hc);
  for (int64_t i = 0; i < hc; ++i)
    for (int64_t j = 0; j < hc; ++j) C(i, j) = mix(2 * hc + i * hc + j) * scale(2) + base(2 * hc + i * hc + j);
  for (int64_t i = 0; i < hc; ++i) {  // row softmax, then eps
    const double m = C.row(i).maxCoeff();
    C.row(i) = (C.row(i).array() - m).exp();
    C.row(i) /= C.row(i).sum();
    C.row(i).array() += eps;
  }
  auto normalise_columns = [&] {
    for (int64_t j = 0; j < hc; ++j) C.col(j) /= C.col(j).sum() + eps;
  };
  normalise_columns();
  for (int64_t it = 1; it < c.hc_sinkhorn_iters; ++it) {  // rows then columns: ends on a column pass
    for (int64_t i = 0; i < hc; ++i) C.row(i) /= C.row(i).sum() + eps;
    normalise_columns();
  }
  out.comb = C;
  return out;
}

Eigen::VectorXd hc_pre(const Eigen::VectorXd& h, const Weights& w, const std::string& fn_prefix, const ModelConfig& c,
                       HcMix& mix) {
  const Eigen::VectorXd m = mixes(h, w.matrix(fn_prefix + "_fn"), c.norm_eps);
  mix = hc_split_sinkhorn(m, w.vector(fn_prefix + "_scale"), w.vector(fn_prefix + "_base"), c);
  return weighted_streams(h, mix.pre, c.dim);
}

Eigen::VectorXd hc_post(const Eigen::VectorXd& x, const Eigen::VectorXd& residual, const HcMix& mix, int64_t dim) {
  const int64_t hc = mix.post.size();
  Eigen::VectorXd out(hc * dim);
  for (int64_t j = 0; j < hc; ++j) {
    Eigen::VectorXd s = mix.post(j) * x;
    for (int64_t i = 0; i < hc; ++i) s += mix.comb(i, j) * residual.segment(i * dim, dim);
    out.segment(j * dim, dim) = s;
  }
  return out;
}

HcMix HcRows::mix(int64_t t) const {
  const int64_t hc = post.cols();
  HcMix m;
  m.post = post.row(t).transpose();
  m.comb.resize(hc, hc);
  for (int64_t i = 0; i < hc; ++i)
    for (int64_t j = 0; j < hc; ++j) m.comb(i, j) = comb(t, i * hc + j);
  return m;
}

HcRows hc_pre_rows(const RowMatrix& h, const Weights& w, const std::string& fn_prefix, const ModelConfig& c) {
  const int64_t T = h.rows(), hc = c.hc_mult;
  HcRows r{RowMatrix(T, c.dim), RowMatrix(T, hc), RowMatrix(T, hc * hc)};
  for (int64_t t = 0; t < T; ++t) {
    HcMix m;
    r.x.row(t) = hc_pre(h.row(t).transpose(), w, fn_prefix, c, m).transpose();
    r.post.row(t) = m.post.transpose();
    for (int64_t i = 0; i < hc; ++i)
      for (int64_t j = 0; j < hc; ++j) r.comb(t, i * hc + j) = m.comb(i, j);
  }
  return r;
}

RowMatrix hc_post_rows(const RowMatrix& x, const RowMatrix& residual, const HcRows& mix, int64_t dim) {
  RowMatrix out(x.rows(), residual.cols());
  for (int64_t t = 0; t < x.rows(); ++t)
    out.row(t) = hc_post(x.row(t).transpose(), residual.row(t).transpose(), mix.mix(t), dim).transpose();
  return out;
}

Eigen::VectorXd hc_head(const Eigen::VectorXd& h, const Weights& w, const std::string& p, const ModelConfig& c) {
  const Eigen::VectorXd m = mixes(h, w.matrix(p + "hc_head_fn"), c.norm_eps);
  const double scale = w.vector(p + "hc_head_scale")(0);
  const Eigen::VectorXd base = w.vector(p + "hc_head_base");
  Eigen::VectorXd pre(c.hc_mult);
  for (int64_t i = 0; i < c.hc_mult; ++i) pre(i) = sigmoid(m(i) * scale + base(i)) + c.hc_eps;
  return weighted_streams(h, pre, c.dim);
}

Eigen::VectorXd expert_forward(const Weights& w, const std::string& p, const Eigen::VectorXd& x, double swiglu_limit,
                               double weight, bool bf16_stages) {
  const Eigen::VectorXd gate = w.matrix(p + "w1.weight") * x, up = w.matrix(p + "w3.weight") * x;
  const int64_t inter = gate.size();
  const auto stage = [bf16_stages](double v) { return bf16_stages ? reference::bf16_to_float(reference::double_to_bf16(v)) : v; };
  // The clamped SwiGLU is the shared reference's (one row, its one expert kept).
  Eigen::MatrixXd gate_up(1, 2 * inter), act(1, inter);
  gate_up.row(0) << gate.transpose(), up.transpose();
  gate_up = gate_up.unaryExpr(stage);
  reference::filtered_silu_mul(gate_up, Eigen::VectorXi::Zero(1), 1, swiglu_limit, act);
  act = act.unaryExpr(stage);
  return w.matrix(p + "w2.weight") * (weight * act.row(0).transpose());
}

Eigen::VectorXd sqrt_softplus_scores(const Eigen::VectorXd& logits) {
  Eigen::VectorXd scores(logits.size());
  for (int64_t e = 0; e < logits.size(); ++e) {
    const double l = logits(e);
    const double softplus = l > 30 ? l : std::log1p(std::exp(l));
    scores(e) = std::sqrt(softplus);
  }
  return scores;
}

std::vector<int64_t> biased_topk(const Eigen::VectorXd& scores, const Eigen::VectorXd& bias, int64_t k) {
  const Eigen::VectorXd biased = scores + bias;
  std::vector<int64_t> order(static_cast<size_t>(scores.size()));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
    return biased(a) != biased(b) ? biased(a) > biased(b) : a < b;
  });
  return {order.begin(), order.begin() + k};
}

Eigen::VectorXd routing_weights(const Eigen::VectorXd& scores, const std::vector<int64_t>& chosen) {
  double total = 0;
  for (int64_t e : chosen) total += scores(e);
  Eigen::VectorXd weights(static_cast<Eigen::Index>(chosen.size()));
  for (size_t k = 0; k < chosen.size(); ++k) weights(static_cast<Eigen::Index>(k)) = scores(chosen[k]) / total;
  return weights;
}

Routing route(const ModelConfig& c, const Weights& w, int64_t layer, const std::string& p, const Eigen::VectorXd& logits,
              int64_t token_id) {
  const Eigen::VectorXd scores = sqrt_softplus_scores(logits);
  Routing r;
  if (layer < c.n_hash_layers) {
    const auto table = w.matrix(p + "gate.tid2eid");
    for (int64_t k = 0; k < c.n_activated_experts; ++k) r.ids.push_back(static_cast<int64_t>(table(token_id, k)));
  } else {
    r.ids = biased_topk(scores, w.vector(p + "gate.bias"), c.n_activated_experts);
  }
  r.weights = routing_weights(scores, r.ids);
  return r;
}

Eigen::VectorXd routed_experts(const ModelConfig& c, const Weights& w, const std::string& p, const Eigen::VectorXd& x,
                               const std::vector<int64_t>& ids, const Eigen::VectorXd& weights, bool bf16_stages) {
  Eigen::VectorXd y = Eigen::VectorXd::Zero(c.dim);
  for (size_t k = 0; k < ids.size(); ++k)  // the route scale, once, in the expert's weight
    y += expert_forward(w, p + "experts." + std::to_string(ids[k]) + ".", x, c.swiglu_limit,
                        weights(static_cast<Eigen::Index>(k)) * c.route_scale, bf16_stages);
  return y;
}

Eigen::VectorXd moe_forward(const ModelConfig& c, const Weights& w, int64_t layer, const std::string& p,
                            const Eigen::VectorXd& x, int64_t token_id) {
  const Routing r = route(c, w, layer, p, w.matrix(p + "gate.weight") * x, token_id);
  return routed_experts(c, w, p, x, r.ids, r.weights, false) + expert_forward(w, p + "shared_experts.", x, c.swiglu_limit, 1.0, false);
}

RowMatrix moe_rows(const ModelConfig& c, const Weights& w, int64_t layer, const std::string& p, const RowMatrix& x,
                   const std::vector<int64_t>& tokens, bool bf16_stages, OpObserver* observer) {
  const int64_t T = x.rows(), k = c.n_activated_experts;
  RowMatrix logits = x * w.matrix(p + "gate.weight").transpose();
  if (observer) observer->op(p + "gate", {{"x", &x}}, {{"logits", &logits}});
  RowMatrix ids(T, k), weights(T, k), token_ids(T, 1);
  for (int64_t t = 0; t < T; ++t) {
    const Routing r = route(c, w, layer, p, logits.row(t).transpose(), tokens[t]);
    for (int64_t j = 0; j < k; ++j) ids(t, j) = static_cast<double>(r.ids[j]);
    weights.row(t) = r.weights.transpose();
    token_ids(t, 0) = static_cast<double>(tokens[t]);
  }
  if (observer)
    observer->op(p + "route", {{"logits", &logits}, {"tokens", &token_ids}},
                 {{"ids", &ids, OpValues::index}, {"weights", &weights}});
  RowMatrix routed(T, c.dim), shared(T, c.dim);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int64_t> chosen;
    for (int64_t j = 0; j < k; ++j) {
      const double e = ids(t, j);  // an observer's ids are checked: they name weights
      if (!(e >= 0 && e < static_cast<double>(c.n_routed_experts)) || e != std::floor(e))
        throw std::invalid_argument(p + "route: expert id " + std::to_string(e) + " outside [0, n_routed_experts)");
      chosen.push_back(static_cast<int64_t>(e));
    }
    routed.row(t) = routed_experts(c, w, p, x.row(t).transpose(), chosen, weights.row(t).transpose(), bf16_stages).transpose();
  }
  if (observer) observer->op(p + "experts", {{"x", &x}, {"ids", &ids}, {"weights", &weights}}, {{"y", &routed}});
  for (int64_t t = 0; t < T; ++t)
    shared.row(t) = expert_forward(w, p + "shared_experts.", x.row(t).transpose(), c.swiglu_limit, 1.0, bf16_stages).transpose();
  if (observer) observer->op(p + "shared", {{"x", &x}}, {{"y", &shared}});
  return routed + shared;
}

}  // namespace dsv4h::model
