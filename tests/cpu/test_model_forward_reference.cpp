// The fp64 reference forward of the tiny model (issue 31, spec 2 and 3): its pieces on their own
// (Sinkhorn, Hadamard, FP4, the sink, the route scale; the compressor's are reference/compressor.h's
// own tests), and the model's self-consistency: a prompt's prefill and its token-by-token decode
// give the same logits and per-layer hidden streams, over lengths crossing 4, the window, 128 and
// index_topk (the compressor's dense closed form against its state machine among them).
#include <gtest/gtest.h>

#include <cmath>

#include "model/attention.h"
#include "model/block.h"
#include "model/forward.h"
#include "reference/errors.h"

namespace dsv4h::model {
namespace {

ModelConfig tiny() { return load_config("model/configs/tiny.json"); }

// index_topk 16 makes the indexer truncate from 17 compressed entries on (position 67).
ModelConfig tiny_truncating() {
  ModelConfig c = tiny();
  c.index_topk = 16;
  return c;
}

std::vector<int64_t> prompt(int64_t n, int64_t vocab) {
  std::vector<int64_t> tokens;
  for (int64_t t = 0; t < n; ++t) tokens.push_back((t * 37 + 11) % vocab);
  return tokens;
}

double max_abs(const RowMatrix& m) { return m.cwiseAbs().maxCoeff(); }

TEST(ModelForward, SinkhornCombinationIsDoublyStochastic) {
  const ModelConfig c = tiny();
  Eigen::VectorXd mix = Eigen::VectorXd::LinSpaced(c.hc_mix(), -2, 3);
  const HcMix m = hc_split_sinkhorn(mix, Eigen::Vector3d(0.5, 0.4, 0.6), Eigen::VectorXd::Zero(c.hc_mix()), c);
  for (int64_t j = 0; j < c.hc_mult; ++j) EXPECT_NEAR(m.comb.col(j).sum(), 1.0, 1e-5);  // ends on columns
  for (int64_t i = 0; i < c.hc_mult; ++i) EXPECT_NEAR(m.comb.row(i).sum(), 1.0, 1e-3);
  EXPECT_TRUE((m.post.array() > 0).all() && (m.post.array() < 2).all());
  EXPECT_TRUE((m.pre.array() > c.hc_eps).all());
}

TEST(ModelForward, HadamardIsOrthonormalAndFp4OnItsGrid) {
  Eigen::VectorXd x = Eigen::VectorXd::LinSpaced(128, -3, 5);
  EXPECT_NEAR(hadamard128(x).norm(), x.norm(), 1e-12);
  EXPECT_LT((hadamard128(hadamard128(x)) - x).cwiseAbs().maxCoeff(), 1e-12);
  const Eigen::VectorXd q = fp4_qdq(x);
  for (int64_t b = 0; b < 128; b += 32) {
    const double amax = x.segment(b, 32).cwiseAbs().maxCoeff();
    const double scale = std::ldexp(1.0, static_cast<int>(std::ceil(std::log2(amax / 6))));
    for (int64_t i = b; i < b + 32; ++i) {
      const double code = std::abs(q(i)) / scale;
      EXPECT_TRUE(code == 0 || code == 0.5 || code == 1 || code == 1.5 || code == 2 || code == 3 || code == 4 || code == 6)
          << i << ": " << q(i);
      EXPECT_LE(std::abs(q(i) - x(i)), scale) << i;
    }
  }
}

TEST(ModelForward, OneKeyAttentionIsDampedByTheSink) {
  // With one key, o = k * e^s / (e^s + e^sink) (spec 3.4): the sink takes its share of the softmax.
  Eigen::MatrixXd q = Eigen::MatrixXd::Zero(512, 2);
  q(0, 0) = 3, q(5, 1) = -1;
  Eigen::VectorXd k = Eigen::VectorXd::LinSpaced(512, -1, 1);
  const Eigen::Vector2d sink(0.25, -2);
  const Eigen::MatrixXd o = attend(q, {&k}, sink);
  for (int h = 0; h < 2; ++h) {
    const double s = q.col(h).dot(k) / std::sqrt(512.0);
    EXPECT_LT((o.col(h) - k * (std::exp(s) / (std::exp(s) + std::exp(sink(h))))).cwiseAbs().maxCoeff(), 1e-15);
  }
  EXPECT_EQ(attend(q, {}, sink), Eigen::MatrixXd::Zero(512, 2));  // no key: 0, never NaN
}

TEST(ModelForward, CachedLatentIsTheCachesContent) {
  // The cached latent is a fixed point of the MODEL1 pack and unpack: the nope dims on the fp8
  // grid of their tile's scale, the rope dims bf16.
  Eigen::VectorXd x = Eigen::VectorXd::LinSpaced(512, -3, 2);
  x(7) = 40;
  const Eigen::VectorXd cached = cache_qdq(x);
  EXPECT_EQ(cache_qdq(cached), cached);
  EXPECT_NE(cached.head(448), x.head(448));
  // Half an e4m3 step at the scale: tiles of amax about 3 have scale 2^-7 and values up to 384
  // times it (step 32), so 0.125; tile 0 (amax 40, scale 2^-3) holds 40 exactly, its others at
  // 24 times the scale (step 2), 0.125 as well; plus the bf16 rounding before the pack, half a
  // bf16 step below 4 (2^-7).
  EXPECT_LE((cached - x).cwiseAbs().maxCoeff(), 0.125 + 0.0078125);
}

TEST(ModelForward, TheClampChangesTheSeededModel) {
  // The seeded experts push some gate and up values past swiglu_limit: without the clamp (a
  // limit no value reaches) the logits move, so a missing clamp is visible at model level.
  ModelConfig clamped = tiny(), unclamped = tiny();
  unclamped.swiglu_limit = 1e6;
  const Weights weights = make_weights(clamped, 11);
  const std::vector<int64_t> tokens = prompt(6, 512);
  RequestState a = ReferenceModel(clamped, weights).new_request(), b = a;
  const RowMatrix la = ReferenceModel(clamped, weights).forward(a, tokens).logits;
  const RowMatrix lb = ReferenceModel(unclamped, weights).forward(b, tokens).logits;
  EXPECT_GT(max_abs(la - lb), 1e-3 * max_abs(la));
}

TEST(ModelForward, RouteScaleIsAppliedOnce) {
  ModelConfig c = tiny();
  const Weights w = make_weights(c, 5);
  const Eigen::VectorXd x = Eigen::VectorXd::LinSpaced(c.dim, -1, 1);
  const Eigen::VectorXd shared = expert_forward(w, "layers.1.ffn.shared_experts.", x, c.swiglu_limit, 1.0, false);
  for (int64_t layer : {0, 1}) {  // hash routed and bias routed
    const std::string p = "layers." + std::to_string(layer) + ".ffn.";
    c.route_scale = 1.0;
    const Eigen::VectorXd one = moe_forward(c, w, layer, p, x, 17) - expert_forward(w, p + "shared_experts.", x, c.swiglu_limit, 1.0, false);
    c.route_scale = 1.5;
    const Eigen::VectorXd scaled = moe_forward(c, w, layer, p, x, 17) - expert_forward(w, p + "shared_experts.", x, c.swiglu_limit, 1.0, false);
    EXPECT_LT((scaled - 1.5 * one).cwiseAbs().maxCoeff(), 1e-12 * one.cwiseAbs().maxCoeff()) << layer;
  }
  EXPECT_GT(shared.norm(), 0);
}

// Prefill of the first `prefill` tokens then decode of the rest, against one prefill of them all.
// Both paths run the same per-token math in fp64; they differ in how matrix products group their
// sums (a [T, dim] product against one row) and in how the compressed entries are made (one pass
// over the prompt, or the decode state machine), so they agree to rounding: 1e-9 relative to the
// largest logit is a million times fp64's rounding of these sums, and far below any bookkeeping
// slip (a wrong window, entry or expert moves logits by 1e-2 or more).
void expect_prefill_equals_decode(const ModelConfig& config, int64_t length, int64_t prefill) {
  const ReferenceModel model(config, make_weights(config, 11));
  const std::vector<int64_t> tokens = prompt(length, config.vocab_size);
  RequestState whole = model.new_request();
  const ForwardResult all = model.forward(whole, tokens, true);
  RequestState step = model.new_request();
  const ForwardResult first = model.forward(step, {tokens.begin(), tokens.begin() + prefill}, true);
  const double scale = max_abs(all.logits);
  EXPECT_LT(max_abs(first.logits - all.logits.topRows(prefill)), 1e-9 * scale);
  for (int64_t t = prefill; t < length; ++t) {
    const ForwardResult one = model.forward(step, {tokens[t]}, true);
    ASSERT_LT(max_abs(one.logits - all.logits.row(t)), 1e-9 * scale) << "position " << t;
    for (int64_t l = 0; l < config.n_layers; ++l)
      ASSERT_LT(max_abs(one.per_layer[l] - all.per_layer[l].row(t)), 1e-9 * max_abs(all.per_layer[l])) << "position " << t << " layer " << l;
  }
}

TEST(ModelForward, PrefillEqualsDecodeAcrossEveryBoundary) {
  // 140 tokens: C4 entries from position 3, the indexer truncating (16 of 17+) from 67, the
  // window full at 127 and sliding from 128, the first C128 entry at 127.
  expect_prefill_equals_decode(tiny_truncating(), 140, 1);
}

TEST(ModelForward, PrefillOfAnyLengthThenDecode) {
  for (int64_t prefill : {3, 4, 127, 129}) expect_prefill_equals_decode(tiny_truncating(), 132, prefill);
}

TEST(ModelForward, IndexerTruncationChangesTheAttention) {
  // The same weights with index_topk 512 (every entry) and 16: equal while a query sees at most 16
  // C4 entries (position 66 and before), different after, so the truncating path above is exercised.
  const Weights weights = make_weights(tiny(), 11);
  const ReferenceModel all(tiny(), weights), truncating(tiny_truncating(), weights);
  const std::vector<int64_t> tokens = prompt(80, 512);
  RequestState a = all.new_request(), b = truncating.new_request();
  const RowMatrix la = all.forward(a, tokens).logits, lb = truncating.forward(b, tokens).logits;
  EXPECT_LT(max_abs(la.topRows(67) - lb.topRows(67)), 1e-12 * max_abs(la));
  EXPECT_GT(max_abs(la.row(79) - lb.row(79)), 1e-6 * max_abs(la));
}

TEST(ModelForward, PerLayerDumpsAndLogitsAreFiniteAndMove) {
  const ModelConfig config = tiny();
  const ReferenceModel model(config, make_weights(config, 2));
  RequestState state = model.new_request();
  const ForwardResult r = model.forward(state, prompt(9, config.vocab_size), true);
  ASSERT_EQ(r.per_layer.size(), static_cast<size_t>(config.n_layers));
  for (const RowMatrix& h : r.per_layer) {
    EXPECT_TRUE(h.allFinite());
    EXPECT_EQ(h.cols(), config.hc_mult * config.dim);
  }
  EXPECT_EQ(r.logits.rows(), 9);
  EXPECT_EQ(r.logits.cols(), config.vocab_size);
  EXPECT_TRUE(r.logits.allFinite());
  // Of order one and not constant: the seeded weights keep the activations alive through the layers.
  EXPECT_GT(max_abs(r.logits), 1e-2);
  EXPECT_LT(max_abs(r.logits), 1e3);
  EXPECT_GT(max_abs(r.per_layer[3] - r.per_layer[2]), 1e-3);
}

TEST(ModelForward, MtpPrefillEqualsDecode) {
  const ModelConfig config = tiny();
  const ReferenceModel model(config, make_weights(config, 4));
  const int64_t n = 12;
  const std::vector<int64_t> tokens = prompt(n + 1, config.vocab_size);
  RequestState state = model.new_request();
  const ForwardResult main = model.forward(state, {tokens.begin(), tokens.end() - 1});
  RequestState whole = model.new_request();
  const ForwardResult all = model.mtp_forward(whole, 0, main.hidden, {tokens.begin() + 1, tokens.end()});
  EXPECT_TRUE(all.logits.allFinite());
  RequestState step = model.new_request();
  for (int64_t t = 0; t < n; ++t) {
    const ForwardResult one = model.mtp_forward(step, 0, main.hidden.row(t), {tokens[t + 1]});
    ASSERT_LT(max_abs(one.logits - all.logits.row(t)), 1e-9 * max_abs(all.logits)) << t;
  }
}

TEST(ModelForward, BadTokensAreBadInput) {
  const ModelConfig config = tiny();
  const ReferenceModel model(config, make_weights(config, 2));
  RequestState state = model.new_request();
  EXPECT_THROW(model.forward(state, {1, 512}), BadInput);
  EXPECT_THROW(model.forward(state, {-1}), BadInput);
  EXPECT_THROW(model.forward(state, {}), BadInput);
  model.forward(state, {1, 2});
  EXPECT_THROW(model.forward(state, {3, 4}), BadInput);  // decode is one token at a time
}

}  // namespace
}  // namespace dsv4h::model
