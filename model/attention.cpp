#include "attention.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "reference/indexer.h"
#include "reference/kv_cache_model1.h"
#include "reference/narrow_float.h"
#include "reference/rms_norm.h"
#include "reference/rope.h"

namespace dsv4h::model {
namespace {

using reference::apply_rope;
using reference::kRopeDim;

// The e2m1 value nearest to |x| <= 6, ties to the even code (codes 0..7 = 0, .5, 1, 1.5, 2, 3, 4, 6).
double e2m1_round(double x) {
  static const double grid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  const double a = std::abs(x);
  int best = 0;
  for (int c = 1; c < 8; ++c) {
    const double d = std::abs(a - grid[c]), db = std::abs(a - grid[best]);
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  return std::copysign(grid[best], x);
}

}  // namespace

Eigen::VectorXd cache_qdq(const Eigen::VectorXd& latent) {
  using namespace reference;
  if (latent.size() != kModel1Dims) throw std::invalid_argument("cache_qdq: a latent has 512 dims");
  uint16_t bits[kModel1Dims];
  for (int i = 0; i < kModel1Dims; ++i) bits[i] = double_to_bf16(latent(i));
  std::vector<uint8_t> page(static_cast<size_t>(model1_page_bytes(1)), 0);
  model1_pack_token(bits, 1, 0, page.data());
  model1_unpack_token(page.data(), 1, 0, bits);
  Eigen::VectorXd out(kModel1Dims);
  for (int i = 0; i < kModel1Dims; ++i) out(i) = bf16_to_float(bits[i]);
  return out;
}

Eigen::VectorXd hadamard128(const Eigen::VectorXd& x) {
  if (x.size() != 128) throw std::invalid_argument("hadamard128: expects 128 values");
  return reference::hadamard128(x.transpose()).transpose();
}

Eigen::VectorXd fp4_qdq(const Eigen::VectorXd& x) {
  constexpr int kBlock = 32;
  if (x.size() % kBlock != 0) throw std::invalid_argument("fp4_qdq: size must be a multiple of 32");
  Eigen::VectorXd y(x.size());
  for (int64_t b = 0; b < x.size(); b += kBlock) {
    const double amax = std::max(x.segment(b, kBlock).cwiseAbs().maxCoeff(), 6 * std::ldexp(1.0, -126));
    int e = static_cast<int>(std::ceil(std::log2(amax / 6)));
    while (amax / std::ldexp(1.0, e) > 6) ++e;  // log2 of a near-power of two may round down
    const double scale = std::ldexp(1.0, e);
    for (int64_t i = b; i < b + kBlock; ++i) y(i) = e2m1_round(x(i) / scale) * scale;
  }
  return y;
}

std::vector<int64_t> index_select(const Eigen::MatrixXd& q_heads, const Eigen::VectorXd& head_weights,
                                  const std::vector<Eigen::VectorXd>& keys, int64_t visible, int64_t topk) {
  // The indexer component's reference: its scores and its top-k (ties to the lower index).
  Eigen::MatrixXd key_rows(visible, q_heads.rows());
  for (int64_t j = 0; j < visible; ++j) key_rows.row(j) = keys[static_cast<size_t>(j)].transpose();
  const Eigen::VectorXd scores = reference::indexer_scores(q_heads.transpose(), head_weights, key_rows, visible);
  std::vector<int64_t> chosen;
  for (int32_t j : reference::indexer_topk(scores, visible, topk))
    if (j >= 0) chosen.push_back(j);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

Eigen::MatrixXd attend(const Eigen::MatrixXd& q, const std::vector<const Eigen::VectorXd*>& keys, const Eigen::VectorXd& sink) {
  const int64_t heads = q.cols();
  Eigen::MatrixXd o = Eigen::MatrixXd::Zero(q.rows(), heads);
  if (keys.empty()) return o;
  const double scale = 1 / std::sqrt(static_cast<double>(q.rows()));
  Eigen::VectorXd s(static_cast<int64_t>(keys.size()));
  for (int64_t h = 0; h < heads; ++h) {
    for (size_t i = 0; i < keys.size(); ++i) s(i) = q.col(h).dot(*keys[i]) * scale;
    const double m = s.maxCoeff();
    double den = std::exp(sink(h) - m);
    for (size_t i = 0; i < keys.size(); ++i) {
      const double w = std::exp(s(i) - m);
      o.col(h) += w * *keys[i];
      den += w;
    }
    o.col(h) /= den;
  }
  return o;
}

namespace {

// The compressed entries (spec 3.2) that tokens x[t] (positions first_pos + t) complete, as rows,
// by the compressor component's reference on the kv and score rows in fp32 (as the GEMMs store
// them): a prefill (first_pos 0) by its dense closed form, which leaves the ring a decode goes on
// from; a decode by its state machine over that ring. Prefill-vs-decode agreement checks the two.
// The main entries then go through the MODEL1 FP8 pack, the indexer's keys through FP4.
RowMatrix run_compressor(const ModelConfig& c, const Weights& w, const std::string& p, int64_t layer, int dims,
                         bool indexer_key, const RowMatrix& x, int64_t first_pos, bool indexer_fp4, reference::RowMatrixXf& ring) {
  const int ratio = static_cast<int>(c.compress_ratios[layer]);
  const reference::CompressorConfig config{ratio, dims};
  if (c.norm_eps != reference::kCompressorNormEps ||
      reference::rope_frequencies(c.rope(layer)) != reference::rope_frequencies(reference::rope_for_ratio(ratio)))
    throw std::invalid_argument(p + ": the compressor reference holds norm_eps 1e-6 and the compressed layers' rope");
  const reference::RowMatrixXf kv = (x * w.matrix(p + "wkv.weight").transpose()).cast<float>();
  const reference::RowMatrixXf score = (x * w.matrix(p + "wgate.weight").transpose()).cast<float>();
  const reference::CompressorWeights weights{w.matrix(p + "ape").cast<float>(), w.vector(p + "norm.weight")};
  if (ring.size() == 0) ring = reference::compressor_clean_ring(config);
  std::vector<Eigen::VectorXd> raw;
  if (first_pos == 0) {
    const Eigen::MatrixXd dense = reference::compress_dense(config, kv, score, weights);
    for (int64_t j = 0; j < dense.rows(); ++j) raw.push_back(dense.row(j).transpose());
    // The ring's contract: row r holds [kv | S] of the latest position = r (mod its rows).
    const int64_t rows = ring.rows(), width = kv.cols();
    for (int64_t t = std::max<int64_t>(0, x.rows() - rows); t < x.rows(); ++t)
      for (int64_t k = 0; k < width; ++k) {
        ring(t % rows, k) = kv(t, k);
        ring(t % rows, width + k) = reference::compressor_state_score(score(t, k), weights.ape(t % ratio, k));
      }
  } else {
    if (x.rows() != 1) throw std::invalid_argument("attention: after a prefill, tokens come one at a time (decode)");
    for (const reference::CompressorEmission& e : reference::compress_extend(config, ring, first_pos, kv, score, weights))
      raw.push_back(e.value);
  }
  RowMatrix entries(static_cast<int64_t>(raw.size()), dims);
  for (size_t i = 0; i < raw.size(); ++i) {
    entries.row(static_cast<int64_t>(i)) =
        (!indexer_key ? cache_qdq(raw[i]) : indexer_fp4 ? fp4_qdq(raw[i]) : raw[i]).transpose();
  }
  return entries;
}

// A compressor's state before a call, as an op input (a fixture of the compressor starts from it).
RowMatrix ring_before(const ModelConfig& c, int64_t layer, int dims, const reference::RowMatrixXf& ring) {
  if (ring.size() != 0) return ring.cast<double>();
  return reference::compressor_clean_ring({static_cast<int>(c.compress_ratios[layer]), dims}).cast<double>();
}

RowMatrix rows_of(const std::vector<Eigen::VectorXd>& vectors, int64_t width) {
  RowMatrix m(static_cast<int64_t>(vectors.size()), width);
  for (size_t i = 0; i < vectors.size(); ++i) m.row(static_cast<int64_t>(i)) = vectors[i].transpose();
  return m;
}

void append_rows(const RowMatrix& rows, std::vector<Eigen::VectorXd>& to) {
  for (int64_t r = 0; r < rows.rows(); ++r) to.push_back(rows.row(r).transpose());
}

}  // namespace

RowMatrix attention_forward(const ModelConfig& c, const Weights& w, int64_t layer, const std::string& p,
                            const RowMatrix& x, LayerCache& cache, const AttentionOptions& options, OpObserver* observer) {
  const int64_t T = x.rows(), H = c.n_heads, hd = c.head_dim;
  const int64_t first_pos = static_cast<int64_t>(cache.latents.size());
  const int64_t ratio = c.compress_ratios[layer];
  const Eigen::VectorXd freqs = reference::rope_frequencies(c.rope(layer));
  const auto report = [&](const char* op, const std::vector<OpInput>& in, const std::vector<OpOutput>& out) {
    if (observer) observer->op(p + op, in, out);
  };
  const auto linear = [&](const RowMatrix& in, const char* weight, const char* op) {
    RowMatrix y = in * w.matrix(p + weight).transpose();
    report(op, {{"x", &in}}, {{"y", &y}});
    return y;
  };
  const auto norm = [&](const RowMatrix& in, const char* weight, const char* op) {
    RowMatrix y = reference::rms_norm(in, w.vector(p + weight), c.norm_eps);
    report(op, {{"x", &in}}, {{"y", &y}});
    return y;
  };

  // Projections (spec 3.1), rows of the chunk at once; q per head: its norm and its rope.
  const RowMatrix qr = norm(linear(x, "wq_a.weight", "wq_a"), "q_norm.weight", "q_norm");
  const RowMatrix q_proj = linear(qr, "wq_b.weight", "wq_b");
  RowMatrix q_all = q_proj;  // row t: head h's hd dims at h * hd
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      auto head = q_all.row(t).segment(h * hd, hd);
      head /= std::sqrt(head.squaredNorm() / static_cast<double>(hd) + c.norm_eps);
      Eigen::VectorXd v = head.transpose();
      apply_rope(v.tail(kRopeDim), first_pos + t, freqs);
      head = v.transpose();
    }
  report("q_rope", {{"q", &q_proj}}, {{"q", &q_all}});
  const RowMatrix kv_all = norm(linear(x, "wkv.weight", "wkv"), "kv_norm.weight", "kv_norm");
  RowMatrix latents(T, hd);
  for (int64_t t = 0; t < T; ++t) {
    Eigen::VectorXd kv = kv_all.row(t).transpose();
    apply_rope(kv.tail(kRopeDim), first_pos + t, freqs);
    latents.row(t) = cache_qdq(kv).transpose();
  }
  report("kv_cache", {{"kv", &kv_all}}, {{"latent", &latents}});
  append_rows(latents, cache.latents);
  const RowMatrix start = observer ? RowMatrix::Constant(1, 1, static_cast<double>(first_pos)) : RowMatrix();
  if (ratio != 0) {
    const RowMatrix ring = observer ? ring_before(c, layer, static_cast<int>(hd), cache.main_ring) : RowMatrix();
    RowMatrix entries = run_compressor(c, w, p + "compressor.", layer, static_cast<int>(hd), false, x, first_pos,
                                       options.indexer_fp4, cache.main_ring);
    report("compress", {{"x", &x}, {"start", &start}, {"ring", &ring}}, {{"entries", &entries}});
    append_rows(entries, cache.compressed);
  }

  // The lightning indexer (C4, spec 3.3): each row's selection, the first `width` entries of which
  // the last row sees at most, -1 past a row's own.
  const int64_t visible_last = ratio == 0 ? 0 : (first_pos + T) / ratio;
  RowMatrix selected;
  if (ratio == 4) {
    const int index_dims = static_cast<int>(c.index_head_dim);
    const RowMatrix ring = observer ? ring_before(c, layer, index_dims, cache.index_ring) : RowMatrix();
    RowMatrix keys = run_compressor(c, w, p + "indexer.compressor.", layer, index_dims, true, x, first_pos,
                                    options.indexer_fp4, cache.index_ring);
    report("indexer.compress", {{"x", &x}, {"start", &start}, {"ring", &ring}}, {{"keys", &keys}});
    append_rows(keys, cache.index_keys);
    const int64_t nI = c.index_n_heads, id = c.index_head_dim;
    RowMatrix qi = qr * w.matrix(p + "indexer.wq_b.weight").transpose();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < nI; ++h) {
        Eigen::VectorXd head = qi.row(t).segment(h * id, id).transpose();
        apply_rope(head.tail(kRopeDim), first_pos + t, freqs);
        head = hadamard128(head);
        qi.row(t).segment(h * id, id) = (options.indexer_fp4 ? fp4_qdq(head) : head).transpose();
      }
    report("indexer.q", {{"qr", &qr}}, {{"q", &qi}});
    RowMatrix head_weights = x * w.matrix(p + "indexer.weights_proj.weight").transpose() *
                             (1 / std::sqrt(static_cast<double>(id)) / std::sqrt(static_cast<double>(nI)));
    report("indexer.weights", {{"x", &x}}, {{"weights", &head_weights}});
    selected = RowMatrix::Constant(T, std::min(c.index_topk, visible_last), -1);
    for (int64_t t = 0; t < T; ++t) {
      const Eigen::MatrixXd q_heads = Eigen::Map<const Eigen::MatrixXd>(qi.row(t).data(), id, nI);
      const std::vector<int64_t> chosen = index_select(q_heads, head_weights.row(t).transpose(), cache.index_keys,
                                                       (first_pos + t + 1) / ratio, c.index_topk);
      for (size_t j = 0; j < chosen.size(); ++j) selected(t, static_cast<int64_t>(j)) = static_cast<double>(chosen[j]);
    }
    report("index_select", {{"q", &qi}, {"weights", &head_weights}}, {{"indices", &selected, OpValues::index}});
  }

  // Sparse attention with the sink (spec 3.4), then the inverse rope of each head's output.
  const Eigen::VectorXd sink = w.vector(p + "attn_sink");
  RowMatrix o_all(T, H * hd);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = first_pos + t;
    std::vector<const Eigen::VectorXd*> keys;
    for (int64_t s = std::max<int64_t>(0, pos - c.window_size + 1); s <= pos; ++s) keys.push_back(&cache.latents[s]);
    if (ratio == 128)
      for (int64_t j = 0; j < (pos + 1) / ratio; ++j) keys.push_back(&cache.compressed[j]);
    for (int64_t j = 0; j < selected.cols(); ++j) {
      const double e = selected(t, j);  // an observer's indices are checked: they address the cache
      if (e == -1) continue;
      if (!(e >= 0 && e < static_cast<double>(cache.compressed.size())) || e != std::floor(e))
        throw std::invalid_argument(p + "index_select: entry " + std::to_string(e) + " outside the cache");
      keys.push_back(&cache.compressed[static_cast<size_t>(e)]);
    }
    const Eigen::MatrixXd q = Eigen::Map<const Eigen::MatrixXd>(q_all.row(t).data(), hd, H);  // column h = head h
    Eigen::MatrixXd o = attend(q, keys, sink);
    for (int64_t h = 0; h < H; ++h) apply_rope(o.col(h).tail(kRopeDim), pos, freqs, true);
    o_all.row(t) = Eigen::Map<const Eigen::RowVectorXd>(o.data(), H * hd);
  }
  if (observer) {  // the keys it read: the cache's latents and compressed entries (a fixture packs them)
    const RowMatrix latents_in = rows_of(cache.latents, hd), compressed_in = rows_of(cache.compressed, hd);
    std::vector<OpInput> in = {{"q", &q_all}, {"start", &start}, {"latents", &latents_in}, {"compressed", &compressed_in}};
    if (ratio == 4) in.push_back({"indices", &selected});
    report("attend", in, {{"o", &o_all}});
  }

  // The grouped output projection: group g's heads concatenated, through its own o_lora block.
  const auto wo_a = w.matrix(p + "wo_a.weight");
  const int64_t G = c.o_groups, group_in = c.heads_per_group() * hd;
  RowMatrix og(T, G * c.o_lora_rank);
  for (int64_t g = 0; g < G; ++g)
    og.middleCols(g * c.o_lora_rank, c.o_lora_rank) =
        o_all.middleCols(g * group_in, group_in) * wo_a.middleRows(g * c.o_lora_rank, c.o_lora_rank).transpose();
  report("wo_a", {{"o", &o_all}}, {{"y", &og}});
  return linear(og, "wo_b.weight", "wo_b");
}

}  // namespace dsv4h::model
