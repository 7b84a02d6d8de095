#include "op_fixture.h"

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "harness/case_file.h"
#include "harness/component.h"
#include "harness/poison.h"
#include "reference/kv_cache_model1.h"
#include "reference/narrow_float.h"
#include "op_budgets.h"

namespace dsv4h {
namespace {

const model::RowMatrix& input(const NamedRows& inputs, const std::string& name) {
  for (const auto& [n, v] : inputs)
    if (n == name) return v;
  throw std::logic_error("op_fixture: the op has no input " + name);
}

// Rows in a tensor of `dtype` and `shape` (row major, each value rounded once to the dtype).
HostTensor tensor(const double* values, DType dtype, Shape shape) {
  HostTensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::i32) t.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
    else t.set(i, values[i]);
  }
  return t;
}

HostTensor tensor(const model::RowMatrix& m, DType dtype, Shape shape) { return tensor(m.data(), dtype, std::move(shape)); }

HostTensor weight(const model::Weights& w, const std::string& name, DType dtype) {
  const model::Tensor& t = w.tensor(name);
  return tensor(t.values.data(), dtype, t.shape);
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", v);
  return text;
}

std::string num(int64_t v) { return std::to_string(v); }

// "layers.2.ffn.experts" -> "layers.2.ffn."; "head.norm" -> "".
std::string prefix_of(const std::string& op, const std::string& kind) { return op.substr(0, op.size() - kind.size()); }

// The layer index of "layers.L." ops; the MTP block's follows the main layers.
int64_t layer_index(const std::string& op, const model::ModelConfig& c) {
  const std::string layer = op_layer(op);
  if (layer.rfind("layers.", 0) == 0) return std::stoll(layer.substr(7));
  if (layer.rfind("mtp.", 0) == 0) return c.n_layers + std::stoll(layer.substr(4));
  return -1;
}

// A MODEL1 pool of `rows` latents (cached values, so their pack is exact) at slots 0.., in pages of
// `page_tokens`, with one spare slot.
HostTensor model1_pool(const model::RowMatrix& rows, int64_t page_tokens) {
  const int64_t pages = (rows.rows() + 1 + page_tokens - 1) / page_tokens, page_bytes = reference::model1_page_bytes(page_tokens);
  HostTensor pool(DType::u8, {pages * page_bytes});
  std::vector<uint16_t> bits(static_cast<size_t>(rows.cols()));
  for (int64_t r = 0; r < rows.rows(); ++r) {
    for (int64_t k = 0; k < rows.cols(); ++k) bits[k] = reference::double_to_bf16(rows(r, k));
    reference::model1_pack_token(bits.data(), page_tokens, r % page_tokens, pool.bytes() + r / page_tokens * page_bytes);
  }
  return pool;
}

// The attend of one call as sparse_attention's rows: each token a row at its position, its window
// (spec 6.2's columns p - k) and its compressed entries (C4: the op's selection; C128: every
// visible one) as slots of pools packed from the cache it read. The component takes heads in
// multiples of 16: the model's are padded with heads of q 0 and sink 0, which no real head reads.
bool attention_inputs(const std::string& op, const NamedRows& inputs, const model::ModelConfig& c,
                      const model::Weights& w, std::string& text, TensorMap& in) {
  constexpr int64_t kWindow = 128, kSwaPage = 256;
  if (c.window_size != kWindow || c.head_dim != 512) return false;
  const model::RowMatrix& q = input(inputs, "q");
  const int64_t T = q.rows(), H = c.n_heads, heads = (H + 15) / 16 * 16;
  const int64_t start = static_cast<int64_t>(input(inputs, "start")(0, 0)), ctx = start + T;
  const int64_t ratio = c.compress_ratios[layer_index(op, c)];
  const int64_t width = ratio == 4 ? std::max<int64_t>(64, (c.index_topk + 63) / 64 * 64)
                                   : ratio == 128 ? (ctx / 128 + 64) / 64 * 64 : 0;
  if (heads > 128 || width > 2048) return false;
  text = "sparse_attention(bs=" + num(T) + ",heads=" + num(heads) + ",ratio=" + num(ratio) + ",ctx=" + num(ctx) +
         (ratio == 4 ? ",index_topk=" + num(width) : "") + ")";
  HostTensor q_in(DType::bf16, {T, heads, 512}), sink(DType::f32, {heads}), positions(DType::i32, {T});
  const model::Tensor& sinks = w.tensor(op.substr(0, op.size() - 6) + "attn_sink");
  for (int64_t h = 0; h < heads; ++h) sink.set(h, h < H ? sinks.values[h] : 0.0);
  HostTensor swa_indices(DType::i32, {T, kWindow}), swa_lengths(DType::i32, {T});
  HostTensor extra_indices(DType::i32, {T, std::max<int64_t>(width, 1)}), extra_lengths(DType::i32, {T});
  const model::RowMatrix* selected = ratio == 4 ? &input(inputs, "indices") : nullptr;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t p = start + t;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t k = 0; k < 512; ++k) q_in.set((t * heads + h) * 512 + k, h < H ? q(t, h * 512 + k) : 0.0);
    positions.data<int32_t>()[t] = static_cast<int32_t>(p);
    swa_lengths.data<int32_t>()[t] = static_cast<int32_t>(std::min(p + 1, kWindow));
    for (int64_t k = 0; k < kWindow; ++k) swa_indices.data<int32_t>()[t * kWindow + k] = k <= p ? static_cast<int32_t>(p - k) : -1;
    if (ratio == 0) continue;
    int32_t* row = extra_indices.data<int32_t>() + t * width;
    for (int64_t j = 0; j < width; ++j) row[j] = -1;
    int64_t count = 0;
    if (selected)
      for (int64_t j = 0; j < selected->cols(); ++j) row[count++] = static_cast<int32_t>((*selected)(t, j));
    else
      for (int64_t j = 0; j < (p + 1) / 128; ++j) row[count++] = static_cast<int32_t>(j);
    extra_lengths.data<int32_t>()[t] = static_cast<int32_t>(std::max<int64_t>(count, 1));
  }
  in.emplace("q", std::move(q_in));
  in.emplace("sink", std::move(sink));
  in.emplace("positions", std::move(positions));
  in.emplace("swa_cache", model1_pool(input(inputs, "latents"), kSwaPage));
  in.emplace("swa_indices", std::move(swa_indices));
  in.emplace("swa_lengths", std::move(swa_lengths));
  if (ratio != 0) {
    in.emplace("extra_cache", model1_pool(input(inputs, "compressed"), ratio == 4 ? 64 : 2));
    in.emplace("extra_indices", std::move(extra_indices));
    in.emplace("extra_lengths", std::move(extra_lengths));
  }
  return true;
}

}  // namespace

std::optional<OpFixture> op_fixture(const std::string& op, const NamedRows& inputs, const model::ModelConfig& c,
                                    const model::Weights& w) {
  const std::string component = op_budget(op, c).component, kind = op_kind(op);
  const int64_t dim = c.dim, hc = c.hc_mult;
  std::string text;
  TensorMap in;
  if (component == "rms_norm") {
    const model::RowMatrix& x = input(inputs, "x");
    // The head's norm weight is "norm.weight" ("mtp.M.norm.weight"); the others' the op's own.
    const std::string weight_name = kind == "head.norm" ? op.substr(0, op.size() - 9) + "norm.weight" : op + ".weight";
    text = "rms_norm(rows=" + num(x.rows()) + ",dim=" + num(x.cols()) + ",eps=" + number(c.norm_eps) + ")";
    in = {{"x", tensor(x, DType::bf16, {x.rows(), x.cols()})}, {"weight", weight(w, weight_name, DType::f32)}};
  } else if (component == "mhc") {
    const bool pre = kind.size() > 4 && kind.substr(kind.size() - 4) == ".pre";
    const std::string sublayer = op.substr(0, op.rfind('.'));  // "layers.1.hc_attn"
    const int64_t T = input(inputs, pre ? "h" : "x").rows();
    text = "mhc(op=" + num(pre ? 0 : 1) + ",tokens=" + num(T) + ",dim=" + num(dim) + ",iters=" + num(c.hc_sinkhorn_iters) +
           ",hc_eps=" + number(c.hc_eps) + ",norm_eps=" + number(c.norm_eps) + ")";
    if (pre)
      in = {{"h", tensor(input(inputs, "h"), DType::bf16, {T, hc, dim})},
            {"fn", weight(w, sublayer + "_fn", DType::f32)},
            {"scale", weight(w, sublayer + "_scale", DType::f32)},
            {"base", weight(w, sublayer + "_base", DType::f32)}};
    else
      in = {{"x", tensor(input(inputs, "x"), DType::bf16, {T, dim})},
            {"residual", tensor(input(inputs, "residual"), DType::bf16, {T, hc, dim})},
            {"post", tensor(input(inputs, "post"), DType::f32, {T, hc})},
            {"comb", tensor(input(inputs, "comb"), DType::f32, {T, hc, hc})}};
  } else if (component == "moe_routing") {
    const model::RowMatrix& logits = input(inputs, "logits");
    const std::string p = prefix_of(op, "route");
    const bool hash = layer_index(op, c) < c.n_hash_layers;
    text = "moe_routing(tokens=" + num(logits.rows()) + ",experts=" + num(c.n_routed_experts) + ",topk=" +
           num(c.n_activated_experts) + ",hash=" + num(hash) + ",vocab=" + num(c.vocab_size) + ",route_scale=" +
           number(c.route_scale) + ")";
    in = {{"logits", tensor(logits, DType::f32, {logits.rows(), logits.cols()})}};
    if (hash) {
      in.emplace("token_ids", tensor(input(inputs, "tokens"), DType::i32, {logits.rows()}));
      in.emplace("tid2eid", weight(w, p + "gate.tid2eid", DType::i32));
    } else {
      in.emplace("bias", weight(w, p + "gate.bias", DType::f32));
    }
  } else if (component == "moe") {
    // The routed experts as they are; the shared expert as the one expert of every token, weight 1.
    const model::RowMatrix& x = input(inputs, "x");
    const bool shared = kind == "ffn.shared";
    const std::string p = prefix_of(op, shared ? "shared" : "experts");
    const int64_t T = x.rows(), I = c.moe_inter_dim, E = shared ? 1 : c.n_routed_experts, k = shared ? 1 : c.n_activated_experts;
    if (c.swiglu_limit != 10) return std::nullopt;  // the moe component's clamp is DeepSeek-V4's, 10
    text = "moe(tokens=" + num(T) + ",hidden=" + num(dim) + ",inter=" + num(I) + ",experts=" + num(E) + ",topk=" + num(k) +
           ",ranks=1,rank=0,route_scale=" + number(shared ? 1.0 : c.route_scale) + ")";
    const model::RowMatrix ids = shared ? model::RowMatrix::Zero(T, 1) : input(inputs, "ids");
    const model::RowMatrix weights = shared ? model::RowMatrix::Ones(T, 1) : input(inputs, "weights");
    HostTensor gate_up(DType::bf16, {E, 2 * I, dim}), down(DType::bf16, {E, dim, I});
    for (int64_t e = 0; e < E; ++e) {
      const std::string expert = p + (shared ? "shared_experts." : "experts." + num(e) + ".");
      const auto w1 = w.matrix(expert + "w1.weight"), w3 = w.matrix(expert + "w3.weight"), w2 = w.matrix(expert + "w2.weight");
      for (int64_t r = 0; r < I; ++r)
        for (int64_t j = 0; j < dim; ++j) {
          gate_up.set((e * 2 * I + r) * dim + j, w1(r, j));
          gate_up.set((e * 2 * I + I + r) * dim + j, w3(r, j));
        }
      for (int64_t r = 0; r < dim; ++r)
        for (int64_t j = 0; j < I; ++j) down.set((e * dim + r) * I + j, w2(r, j));
    }
    in = {{"hidden", tensor(x, DType::bf16, {T, dim})},
          {"topk_ids", tensor(ids, DType::i32, {T, k})},
          {"topk_weights", tensor(weights, DType::f32, {T, k})},
          {"gate_up_weights", std::move(gate_up)},
          {"down_weights", std::move(down)}};
  } else if (component == "compressor") {
    // One request's step from the op's start and ring (the state the earlier calls left): ring 1
    // is the request's, ring 0 padding's; each entry the step completes goes to the next pool slot.
    const model::RowMatrix& x = input(inputs, "x");
    const model::RowMatrix& ring = input(inputs, "ring");
    const bool key = kind == "attn.indexer.compress";
    const std::string p = op.substr(0, op.size() - 8) + "compressor.";  // "...attn." or "...attn.indexer."
    const int64_t ratio = c.compress_ratios[layer_index(op, c)], dims = key ? c.index_head_dim : c.head_dim;
    const int64_t T = x.rows(), start = static_cast<int64_t>(input(inputs, "start")(0, 0)), R = ring.rows();
    text = "compressor(ratio=" + num(ratio) + ",dims=" + num(dims) + ",batch=1,tokens=" + num(T) + ",start=" + num(start) + ")";
    const model::RowMatrix kv = x * w.matrix(p + "wkv.weight").transpose(), score = x * w.matrix(p + "wgate.weight").transpose();
    HostTensor rings(DType::f32, {2 * R, ring.cols()}), out_loc(DType::i32, {T});
    for (int64_t i = 0; i < R * ring.cols(); ++i) rings.set(i, i % ring.cols() < ring.cols() / 2 ? 0.0 : -INFINITY);
    for (int64_t i = 0; i < R * ring.cols(); ++i) rings.set(R * ring.cols() + i, ring.data()[i]);
    int32_t slot = 0;
    for (int64_t t = 0; t < T; ++t) out_loc.data<int32_t>()[t] = (start + t + 1) % ratio == 0 ? ++slot : 0;
    HostTensor one(DType::i32, {1}), first(DType::i32, {1}), length(DType::i32, {1});
    one.data<int32_t>()[0] = 1, first.data<int32_t>()[0] = static_cast<int32_t>(start), length.data<int32_t>()[0] = static_cast<int32_t>(T);
    in = {{"kv", tensor(kv, DType::f32, {T, kv.cols()})},
          {"score", tensor(score, DType::f32, {T, score.cols()})},
          {"ape", weight(w, p + "ape", DType::f32)},
          {"norm_weight", weight(w, p + "norm.weight", DType::f32)},
          {"start", std::move(first)},
          {"extend_len", std::move(length)},
          {"ring_index", std::move(one)},
          {"out_loc", std::move(out_loc)},
          {"ring", std::move(rings)}};
  } else if (component == "sparse_attention") {
    if (!attention_inputs(op, inputs, c, w, text, in)) return std::nullopt;
  } else {
    return std::nullopt;
  }
  const Case test_case = parse_case(text);
  const Component& comp = registry().get(test_case.component());
  comp.validate_inputs(test_case, in);
  TensorMap expected = comp.make_outputs(test_case);
  fill_poison(expected, Poison::a);  // what the reference leaves unwritten must stay so (case_file.h)
  comp.reference(test_case, in, expected);
  return OpFixture{test_case, std::move(in), std::move(expected)};
}

void write_op_fixture(const std::string& path, const OpFixture& fixture, const std::string& note) {
  write_case_file(path, fixture.test_case, fixture.inputs, {{"expected", fixture.expected}}, note);
}

}  // namespace dsv4h
