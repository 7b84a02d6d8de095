#include "forward.h"

#include "model/block.h"
#include "reference/errors.h"
#include "reference/rms_norm.h"

namespace dsv4h::model {

ReferenceModel::ReferenceModel(ModelConfig config, Weights weights, AttentionOptions options)
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

RowMatrix ReferenceModel::block(int64_t layer, const std::string& p, const RowMatrix& h, const std::vector<int64_t>& tokens,
                                LayerCache& cache) const {
  const int64_t T = h.rows(), dim = config_.dim;
  std::vector<HcMix> mix(static_cast<size_t>(T));
  RowMatrix x(T, dim);
  for (int64_t t = 0; t < T; ++t) x.row(t) = hc_pre(h.row(t).transpose(), weights_, p + "hc_attn", config_, mix[t]).transpose();
  x = reference::rms_norm(x, weights_.vector(p + "attn_norm.weight"), config_.norm_eps);
  const RowMatrix attn = attention_forward(config_, weights_, layer, p + "attn.", x, cache, options_);
  RowMatrix mid(T, h.cols());
  for (int64_t t = 0; t < T; ++t) mid.row(t) = hc_post(attn.row(t).transpose(), h.row(t).transpose(), mix[t], dim).transpose();
  for (int64_t t = 0; t < T; ++t) x.row(t) = hc_pre(mid.row(t).transpose(), weights_, p + "hc_ffn", config_, mix[t]).transpose();
  x = reference::rms_norm(x, weights_.vector(p + "ffn_norm.weight"), config_.norm_eps);
  RowMatrix out(T, h.cols());
  for (int64_t t = 0; t < T; ++t) {
    const Eigen::VectorXd y = moe_forward(config_, weights_, layer, p + "ffn.", x.row(t).transpose(), tokens[t]);
    out.row(t) = hc_post(y, mid.row(t).transpose(), mix[t], dim).transpose();
  }
  return out;
}

RowMatrix ReferenceModel::head(const RowMatrix& h, const std::string& p) const {
  RowMatrix y(h.rows(), config_.dim);
  for (int64_t t = 0; t < h.rows(); ++t) y.row(t) = hc_head(h.row(t).transpose(), weights_, p, config_).transpose();
  y = reference::rms_norm(y, weights_.vector(p + "norm.weight"), config_.norm_eps);
  return y * weights_.matrix("head.weight").transpose();
}

ForwardResult ReferenceModel::forward(RequestState& state, const std::vector<int64_t>& tokens, bool keep_layers) const {
  check_tokens(tokens, state.layers.at(0));
  const int64_t T = static_cast<int64_t>(tokens.size()), dim = config_.dim, hc = config_.hc_mult;
  const auto embed = weights_.matrix("embed.weight");
  RowMatrix h(T, hc * dim);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < hc; ++i) h.row(t).segment(i * dim, dim) = embed.row(tokens[t]);
  ForwardResult result;
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    h = block(l, "layers." + std::to_string(l) + ".", h, tokens, state.layers[l]);
    if (keep_layers) result.per_layer.push_back(h);
  }
  result.logits = head(h, "");
  result.hidden = std::move(h);
  return result;
}

ForwardResult ReferenceModel::mtp_forward(RequestState& state, int64_t m, const RowMatrix& main_hidden,
                                          const std::vector<int64_t>& next_tokens) const {
  if (m < 0 || m >= config_.n_mtp_layers) throw BadInput("mtp_forward: no MTP block " + std::to_string(m));
  LayerCache& cache = state.mtp[m];
  check_tokens(next_tokens, cache);
  const int64_t T = static_cast<int64_t>(next_tokens.size()), dim = config_.dim, hc = config_.hc_mult;
  if (main_hidden.rows() != T || main_hidden.cols() != hc * dim)
    throw BadInput("mtp_forward: the main hidden streams must be [" + std::to_string(T) + ", " + std::to_string(hc * dim) + "]");
  const std::string p = "mtp." + std::to_string(m) + ".";
  const auto embed = weights_.matrix("embed.weight");
  RowMatrix e(T, dim);
  for (int64_t t = 0; t < T; ++t) e.row(t) = embed.row(next_tokens[t]);
  const RowMatrix e_proj = reference::rms_norm(e, weights_.vector(p + "enorm.weight"), config_.norm_eps) *
                           weights_.matrix(p + "e_proj.weight").transpose();
  // hnorm and h_proj act on each stream alone; the embedding's projection is added to every stream.
  const Eigen::Map<const RowMatrix> streams(main_hidden.data(), T * hc, dim);
  const RowMatrix h_proj = reference::rms_norm(streams, weights_.vector(p + "hnorm.weight"), config_.norm_eps) *
                           weights_.matrix(p + "h_proj.weight").transpose();
  RowMatrix x(T, hc * dim);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < hc; ++i) x.row(t).segment(i * dim, dim) = e_proj.row(t) + h_proj.row(t * hc + i);
  ForwardResult result;
  result.hidden = block(config_.n_layers + m, p, x, next_tokens, cache);
  result.logits = head(result.hidden, p);
  return result;
}

}  // namespace dsv4h::model
