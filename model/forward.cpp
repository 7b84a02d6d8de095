#include "forward.h"

#include "model/block.h"
#include "reference/errors.h"
#include "reference/rms_norm.h"

namespace dsv4h::model {

ReferenceModel::ReferenceModel(ModelConfig config, Weights weights, ReferenceOptions options)
    : config_(std::move(config)), weights_(std::move(weights)), options_(options) {}

RequestState ReferenceModel::new_request() const {
  RequestState s;
  s.layers.resize(static_cast<size_t>(config_.n_layers));
  s.mtp.resize(static_cast<size_t>(config_.n_mtp_layers));
  return s;
}

void ReferenceModel::check_tokens(const std::vector<int64_t>& tokens, const LayerCache& first) const {
  if (tokens.empty()) throw BadInput("model forward: no tokens");
  if (!first.latents.empty() && tokens.size() != 1)
    throw BadInput("model forward: after the prefill, decode takes one token at a time, got " + std::to_string(tokens.size()));
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= config_.vocab_size)
      throw BadInput("model forward: token " + std::to_string(i) + " is " + std::to_string(tokens[i]) +
                     ", outside the vocabulary [0, " + std::to_string(config_.vocab_size) + ")");
}

RowMatrix ReferenceModel::norm(const RowMatrix& x, const std::string& weight, const std::string& name,
                               OpObserver* observer) const {
  RowMatrix y = reference::rms_norm(x, weights_.vector(weight), config_.norm_eps);
  if (observer) observer->op(name, {{"x", &x}}, {{"y", &y}});
  return y;
}

RowMatrix ReferenceModel::linear(const RowMatrix& x, const std::string& weight, const std::string& name,
                                 OpObserver* observer) const {
  RowMatrix y = x * weights_.matrix(weight).transpose();
  if (observer) observer->op(name, {{"x", &x}}, {{"y", &y}});
  return y;
}

// Each token's embedding row, `copies` times side by side (the main model's hc streams start equal).
RowMatrix ReferenceModel::embed(const std::vector<int64_t>& tokens, int64_t copies, const std::string& name,
                                OpObserver* observer) const {
  const int64_t T = static_cast<int64_t>(tokens.size()), dim = config_.dim;
  const auto table = weights_.matrix("embed.weight");
  RowMatrix h(T, copies * dim), token_ids(T, 1);
  for (int64_t t = 0; t < T; ++t) {
    token_ids(t, 0) = static_cast<double>(tokens[t]);
    for (int64_t i = 0; i < copies; ++i) h.row(t).segment(i * dim, dim) = table.row(tokens[t]);
  }
  if (observer) observer->op(name, {{"tokens", &token_ids}}, {{"h", &h}});
  return h;
}

RowMatrix ReferenceModel::block(int64_t layer, const std::string& p, const RowMatrix& h, const std::vector<int64_t>& tokens,
                                LayerCache& cache, OpObserver* observer) const {
  const int64_t dim = config_.dim;
  HcRows a = hc_pre_rows(h, weights_, p + "hc_attn", config_);
  if (observer) observer->op(p + "hc_attn.pre", {{"h", &h}}, {{"x", &a.x}, {"post", &a.post}, {"comb", &a.comb}});
  const RowMatrix x = norm(a.x, p + "attn_norm.weight", p + "attn_norm", observer);
  RowMatrix attn = attention_forward(config_, weights_, layer, p + "attn.", x, cache, options_.attention, observer);
  RowMatrix mid = hc_post_rows(attn, h, a, dim);
  if (observer)
    observer->op(p + "hc_attn.post", {{"x", &attn}, {"residual", &h}, {"post", &a.post}, {"comb", &a.comb}}, {{"h", &mid}});
  HcRows f = hc_pre_rows(mid, weights_, p + "hc_ffn", config_);
  if (observer) observer->op(p + "hc_ffn.pre", {{"h", &mid}}, {{"x", &f.x}, {"post", &f.post}, {"comb", &f.comb}});
  const RowMatrix y = norm(f.x, p + "ffn_norm.weight", p + "ffn_norm", observer);
  RowMatrix ffn = moe_rows(config_, weights_, layer, p + "ffn.", y, tokens, options_.expert_bf16_stages, observer);
  RowMatrix out = hc_post_rows(ffn, mid, f, dim);
  if (observer)
    observer->op(p + "hc_ffn.post", {{"x", &ffn}, {"residual", &mid}, {"post", &f.post}, {"comb", &f.comb}}, {{"h", &out}});
  return out;
}

RowMatrix ReferenceModel::head(const RowMatrix& h, const std::string& p, OpObserver* observer) const {
  RowMatrix x(h.rows(), config_.dim);
  for (int64_t t = 0; t < h.rows(); ++t) x.row(t) = hc_head(h.row(t).transpose(), weights_, p, config_).transpose();
  if (observer) observer->op(p + "head.hc", {{"h", &h}}, {{"x", &x}});
  const RowMatrix y = norm(x, p + "norm.weight", p + "head.norm", observer);
  return linear(y, "head.weight", p + "head.proj", observer);
}

ForwardResult ReferenceModel::forward(RequestState& state, const std::vector<int64_t>& tokens, bool keep_layers,
                                      OpObserver* observer) const {
  check_tokens(tokens, state.layers.at(0));
  RowMatrix h = embed(tokens, config_.hc_mult, "embed", observer);
  ForwardResult result;
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    h = block(l, "layers." + std::to_string(l) + ".", h, tokens, state.layers[l], observer);
    if (keep_layers) result.per_layer.push_back(h);
  }
  result.logits = head(h, "", observer);
  result.hidden = std::move(h);
  return result;
}

ForwardResult ReferenceModel::mtp_forward(RequestState& state, int64_t m, const RowMatrix& main_hidden,
                                          const std::vector<int64_t>& next_tokens, OpObserver* observer) const {
  if (m < 0 || m >= config_.n_mtp_layers) throw BadInput("mtp_forward: no MTP block " + std::to_string(m));
  LayerCache& cache = state.mtp[m];
  check_tokens(next_tokens, cache);
  const int64_t T = static_cast<int64_t>(next_tokens.size()), dim = config_.dim, hc = config_.hc_mult;
  if (main_hidden.rows() != T || main_hidden.cols() != hc * dim)
    throw BadInput("mtp_forward: the main hidden streams must be [" + std::to_string(T) + ", " + std::to_string(hc * dim) + "]");
  const std::string p = "mtp." + std::to_string(m) + ".";
  const RowMatrix e = embed(next_tokens, 1, p + "embed", observer);
  const RowMatrix e_proj = linear(norm(e, p + "enorm.weight", p + "enorm", observer), p + "e_proj.weight", p + "e_proj", observer);
  // hnorm and h_proj act on each stream alone (rows T * hc); the embedding's projection is added
  // to every stream.
  const RowMatrix streams = Eigen::Map<const RowMatrix>(main_hidden.data(), T * hc, dim);
  const RowMatrix h_proj =
      linear(norm(streams, p + "hnorm.weight", p + "hnorm", observer), p + "h_proj.weight", p + "h_proj", observer);
  RowMatrix x(T, hc * dim);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < hc; ++i) x.row(t).segment(i * dim, dim) = e_proj.row(t) + h_proj.row(t * hc + i);
  if (observer) observer->op(p + "input", {{"e_proj", &e_proj}, {"h_proj", &h_proj}}, {{"h", &x}});
  ForwardResult result;
  result.hidden = block(config_.n_layers + m, p, x, next_tokens, cache, observer);
  result.logits = head(result.hidden, p, observer);
  return result;
}

}  // namespace dsv4h::model
