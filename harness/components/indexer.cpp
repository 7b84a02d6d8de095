// Descriptor of `indexer`, the C4 lightning indexer (spec 3.3, 4.2; issue 29), as three stages
// that each compare like with like:
//   stage=0 (select): scores of each query row over its C4 pages of the fp8 indexer cache and the
//     top-k of topk_transform_512, from the quantised query (codes and scales, as SGLang's
//     fp8_paged_mqa_logits receives them);
//   stage=1 (query): rope on the last 64 dims, the Hadamard rotation and the fp8 quantisation;
//   stage=2 (translate): raw top-k indices to C4 page slots (64 entries a page), -1 kept.
// Splitting at the quantised query keeps the scores comparable: a query computed in fp32 and one
// computed in fp64 round to different fp8 codes near a rounding midpoint, which moves a score by
// far more than the scores' own rounding. The selection is compared as sets, tie-aware.
//
// A query row per token: one a request in decode, `per_request` rows at consecutive positions in
// prefill; a row's position sets its visible entries, (p + 1) / 4. `seq_len` > 0 ends every
// request at p + 1 = seq_len, 0 at random lengths; the page table and the scores are as wide as
// ctx needs (ceil(ctx / 4 / 64) pages), so shorter rows are padded. Every request owns distinct
// random pages of one pool; the entries of its pages past a row's visible ones hold keys too, so
// that reading one shows.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "../../reference/indexer.h"
#include "../../reference/kv_cache_indexer.h"
#include "../../reference/narrow_float.h"
#include "../../reference/rope.h"
#include "../descriptor.h"
#include "../errors.h"
#include "../random.h"
#include "index_tensors.h"
#if DSV4H_GPU_LAYER
#include "../../kernels/indexer.h"
#include "../gpu/device_tensor.h"
#endif

namespace dsv4h {
namespace {

using reference::kC4EntriesPerPage;
using reference::kIndexerHeadDim;

enum class Stage : int64_t { select = 0, query = 1, translate = 2 };

struct Params {
  Stage stage = Stage::select;
  int64_t bs = 4, ctx = 2048, seq_len = 0, per_request = 1, heads = 64, index_topk = 512, quant = 0, pool_pages = 0;
  template <typename F>
  void fields(F& f) {
    f("stage", stage, "0 select (scores + top-k), 1 query (rope, Hadamard, fp8), 2 translate (page slots)");
    f("bs", bs, "query rows, one per request");
    f("ctx", ctx, "longest sequence (tokens) the page table and the scores are wide for");
    f("seq_len", seq_len, "every request's p + 1 at its last row; 0 = random in [rows, ctx]");
    f("per_request", per_request, "query rows a request (1 decode; more: prefill rows at consecutive positions)");
    f("heads", heads, "indexer heads (64 in V4; 4 in the tiny config)");
    f("index_topk", index_topk, "selected entries a row (512 or 1024; 16 in the tiny config)");
    f("quant", quant, "query quantisation: 0 fp8 per (token, head) as SGLang (1, fp4 block 32, has no kernel)");
    f("pool_pages", pool_pages, "pages of the generated indexer cache; 0 = the requests' pages and page 0. A composed "
                                "step sets its full pool's pages, so that the metadata's page_table names pages of it");
  }
};
using IndexerCase = CaseOf<Params>;

struct Sizes {
  int64_t pages = 0;       // page table columns
  int64_t width = 0;       // scores columns: pages * 64
  int64_t pool_pages = 0;  // generated pools: every request's pages, plus page 0 that nobody owns
  int64_t cache_words = 0; // i32 words of one page
};

Sizes sizes_of(const IndexerCase& c) {
  const auto bad = [&](const std::string& why) { return BadInput("indexer: " + why + " in " + c.str()); };
  if (c.stage != Stage::select && c.stage != Stage::query && c.stage != Stage::translate)
    throw bad("stage must be 0 (select), 1 (query) or 2 (translate)");
  if (c.bs < 0 || c.bs > 4096) throw bad("bs must be in [0, 4096]");
  if (c.ctx < 1 || c.ctx > (1 << 20)) throw bad("ctx must be in [1, 2^20]");
  if (c.seq_len < 0 || c.seq_len > c.ctx) throw bad("seq_len must be in [0, ctx] (0 = random lengths)");
  if (c.per_request < 1 || c.per_request > c.ctx) throw bad("per_request must be in [1, ctx]");
  if (c.heads < 4 || c.heads > 64 || c.heads % 4) throw bad("heads must be a multiple of 4 in [4, 64]");
  if (c.index_topk < 1 || c.index_topk > 2048) throw bad("index_topk must be in [1, 2048]");
  if (c.quant != 0)
    throw bad("quant must be 0 (fp8 per token and head); fp4 (block 32) has a reference but no kernel");
  Sizes s;
  s.pages = std::max<int64_t>(1, (c.ctx / 4 + kC4EntriesPerPage - 1) / kC4EntriesPerPage);
  s.width = s.pages * kC4EntriesPerPage;
  s.pool_pages = (c.bs + c.per_request - 1) / c.per_request * s.pages + 1;
  if (c.pool_pages) {
    if (c.pool_pages < s.pool_pages || c.pool_pages > (1 << 20))
      throw bad("pool_pages must hold the requests' " + std::to_string(s.pool_pages - 1) + " pages and page 0, at most 2^20");
    s.pool_pages = c.pool_pages;
  }
  s.cache_words = reference::indexer_page_bytes(kC4EntriesPerPage) / 4;
  if (c.bs * s.width > (int64_t{1} << 26)) throw bad("bs * the scores' width above 2^26");
  return s;
}

const Eigen::VectorXd& rope_freqs() {
  static const Eigen::VectorXd freqs = reference::rope_frequencies(reference::rope_for_ratio(4));
  return freqs;
}

Eigen::MatrixXd query_of(const HostTensor& q, int64_t row, int64_t heads) {
  Eigen::MatrixXd m(heads, kIndexerHeadDim);
  for (int64_t h = 0; h < heads; ++h)
    for (int i = 0; i < kIndexerHeadDim; ++i) m(h, i) = q.get((row * heads + h) * kIndexerHeadDim + i);
  return m;
}

// Rows in requests of `per_request` consecutive positions (the last request may be shorter); a
// request ends at p + 1 = seq_len, or at a random length in [its rows, ctx].
std::vector<int32_t> positions_of(const IndexerCase& c, Rng& rng) {
  std::vector<int32_t> positions;
  while (static_cast<int64_t>(positions.size()) < c.bs) {
    const int64_t n = std::min(c.per_request, c.bs - static_cast<int64_t>(positions.size()));
    const int64_t end = c.seq_len ? std::max(c.seq_len, n) : rng.integer(n, c.ctx);
    for (int64_t k = 0; k < n; ++k) positions.push_back(static_cast<int32_t>(end - n + k));
  }
  return positions;
}

HostTensor i32_tensor(const std::vector<int32_t>& values, const Shape& shape) {
  HostTensor t(DType::i32, shape);
  std::memcpy(t.bytes(), values.data(), values.size() * 4);
  return t;
}

// Each request's distinct pages of the pool (page 0 belongs to nobody), in random order; the rows
// of a request share its page table row.
HostTensor page_table_of(const IndexerCase& c, const Sizes& s, Rng& rng) {
  std::vector<int32_t> pages(static_cast<size_t>(s.pool_pages - 1)), table;
  std::iota(pages.begin(), pages.end(), 1);
  for (size_t i = pages.size(); i > 1; --i) std::swap(pages[i - 1], pages[static_cast<size_t>(rng.integer(0, i - 1))]);
  for (int64_t r = 0; r < c.bs; ++r) {
    const auto first = pages.begin() + (r / c.per_request) * s.pages;
    table.insert(table.end(), first, first + s.pages);
  }
  return i32_tensor(table, {c.bs, s.pages});
}

// Every entry of the pool a key of N(0, 1) values at a random power-of-two scale, packed (spec 4.2).
HostTensor cache_of(const Sizes& s, Rng& rng) {
  HostTensor cache(DType::i32, {s.pool_pages, s.cache_words});
  std::vector<uint16_t> key(kIndexerHeadDim);
  for (int64_t page = 0; page < s.pool_pages; ++page)
    for (int64_t t = 0; t < kC4EntriesPerPage; ++t) {
      const double scale = std::ldexp(1.0, static_cast<int>(rng.integer(-3, 3)));
      for (uint16_t& k : key) k = reference::double_to_bf16(rng.normal() * scale);
      reference::indexer_pack_entry(key.data(), kC4EntriesPerPage, t, cache.bytes() + page * s.cache_words * 4);
    }
  return cache;
}

TensorMap make_inputs(const IndexerCase& c) {
  const Sizes s = sizes_of(c);
  Rng rng(c.seed());
  const std::vector<int32_t> positions = positions_of(c, rng);
  TensorMap in;
  if (c.stage == Stage::translate) {
    std::vector<int32_t> raw;
    for (int32_t p : positions) {
      std::vector<int32_t> visible(static_cast<size_t>(reference::c4_visible(p)));
      std::iota(visible.begin(), visible.end(), 0);
      for (size_t i = visible.size(); i > 1; --i)
        std::swap(visible[i - 1], visible[static_cast<size_t>(rng.integer(0, i - 1))]);
      visible.resize(static_cast<size_t>(c.index_topk), -1);
      raw.insert(raw.end(), visible.begin(), visible.end());
    }
    in.emplace("topk_indices", i32_tensor(raw, {c.bs, c.index_topk}));
    in.emplace("page_table", page_table_of(c, s, rng));
    return in;
  }
  HostTensor q(DType::bf16, {c.bs, c.heads, kIndexerHeadDim});
  fill_normal(q, rng, 0.0, 1.0);
  in.emplace("positions", i32_tensor(positions, {c.bs}));
  if (c.stage == Stage::query) {
    in.emplace("q", std::move(q));
    return in;
  }
  // The select stage reads the query as the query stage leaves it: fp8 codes and scales.
  HostTensor codes(DType::i32, {c.bs, c.heads * kIndexerHeadDim / 4}), scales(DType::f32, {c.bs, c.heads});
  for (int64_t r = 0; r < c.bs; ++r) {
    const reference::IndexerQuery query = reference::indexer_query(
        query_of(q, r, c.heads), positions[static_cast<size_t>(r)], rope_freqs(), reference::IndexerQuant::fp8_per_head);
    std::memcpy(codes.bytes() + r * c.heads * kIndexerHeadDim, query.fp8.data(), query.fp8.size());
    for (int64_t h = 0; h < c.heads; ++h) scales.set(r * c.heads + h, std::ldexp(1.0, query.scale_exp[static_cast<size_t>(h)]));
  }
  HostTensor weights(DType::f32, {c.bs, c.heads});
  fill_normal(weights, rng, 0.0, 1.0 / std::sqrt(128.0 * 64.0));
  in.emplace("q_fp8", std::move(codes));
  in.emplace("q_scale", std::move(scales));
  in.emplace("weights", std::move(weights));
  in.emplace("page_table", page_table_of(c, s, rng));
  in.emplace("indexer_cache", cache_of(s, rng));
  return in;
}

void validate_inputs(const IndexerCase& c, const TensorMap& inputs) {
  const Sizes s = sizes_of(c);
  const auto check_range = [&](const std::string& name, int64_t lo, int64_t hi, int64_t except) {
    const HostTensor& t = inputs.at(name);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const int32_t v = t.data<int32_t>()[i];
      if ((v < lo || v > hi) && v != except)
        throw BadInput("indexer: " + name + t.index_string(i) + " = " + std::to_string(v) + " outside [" +
                       std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
  };
  if (c.stage == Stage::translate) {
    require_i32("indexer", inputs, "topk_indices", {c.bs, c.index_topk});
    require_i32("indexer", inputs, "page_table", {c.bs, s.pages});
    reject_unknown_inputs("indexer", inputs, {"topk_indices", "page_table"});
    check_range("topk_indices", 0, s.width - 1, -1);
    check_range("page_table", 0, (int64_t{1} << 31) / kC4EntriesPerPage - 1, 0);
    return;
  }
  require_i32("indexer", inputs, "positions", {c.bs});
  check_range("positions", 0, c.ctx - 1, 0);
  if (c.stage == Stage::query) {
    require_tensor("indexer", inputs, "q", DType::bf16, {c.bs, c.heads, kIndexerHeadDim});
    reject_unknown_inputs("indexer", inputs, {"q", "positions"});
    return;
  }
  require_i32("indexer", inputs, "q_fp8", {c.bs, c.heads * kIndexerHeadDim / 4});
  require_tensor("indexer", inputs, "q_scale", DType::f32, {c.bs, c.heads});
  require_tensor("indexer", inputs, "weights", DType::f32, {c.bs, c.heads});
  require_i32("indexer", inputs, "page_table", {c.bs, s.pages});
  // Any number of pages: a batch's slices and padded buckets share their whole batch's pool.
  const auto cache = inputs.find("indexer_cache");
  if (cache == inputs.end() || cache->second.dtype() != DType::i32 || cache->second.shape().size() != 2 ||
      cache->second.shape()[0] < 1 || cache->second.shape()[1] != s.cache_words)
    throw BadInput("indexer: input \"indexer_cache\" must be i32[pages >= 1, " + std::to_string(s.cache_words) +
                   "] (64 entries of 132 bytes a page)");
  reject_unknown_inputs("indexer", inputs, {"q_fp8", "q_scale", "weights", "positions", "page_table", "indexer_cache"});
  check_range("page_table", 0, cache->second.shape()[0] - 1, 0);
  const HostTensor& scales = inputs.at("q_scale");
  for (int64_t i = 0; i < scales.numel(); ++i) {
    int e = 0;
    if (!(scales.get(i) > 0) || !std::isfinite(scales.get(i)) || std::frexp(scales.get(i), &e) != 0.5)
      throw BadInput("indexer: q_scale" + scales.index_string(i) + " = " + std::to_string(scales.get(i)) +
                     " is not a positive power of two");
  }
}

TensorMap make_outputs(const IndexerCase& c) {
  const Sizes s = sizes_of(c);
  switch (c.stage) {
    case Stage::query:
      return {{"q_fp8", HostTensor(DType::f32, {c.bs, c.heads, kIndexerHeadDim})},
              {"q_scale", HostTensor(DType::f32, {c.bs, c.heads})}};
    case Stage::translate: return {{"page_indices", HostTensor(DType::i32, {c.bs, c.index_topk})}};
    case Stage::select: break;
  }
  // score_magnitudes: the reference's alone (unchecked), what the scores' check is relative to.
  return {{"scores", HostTensor(DType::f32, {c.bs, s.width})},
          {"score_magnitudes", HostTensor(DType::f32, {c.bs, s.width})},
          {"topk_indices", HostTensor(DType::i32, {c.bs, c.index_topk})}};
}

void run_reference(const IndexerCase& c, const TensorMap& in, TensorMap& out) {
  const Sizes s = sizes_of(c);
  if (c.stage == Stage::translate) {
    const HostTensor& raw = in.at("topk_indices");
    for (int64_t r = 0; r < c.bs; ++r) {
      const std::vector<int32_t> row(raw.data<int32_t>() + r * c.index_topk, raw.data<int32_t>() + (r + 1) * c.index_topk);
      const std::vector<int32_t> slots =
          reference::c4_page_slots(row, in.at("page_table").data<int32_t>() + r * s.pages, s.pages);
      std::memcpy(out.at("page_indices").data<int32_t>() + r * c.index_topk, slots.data(), slots.size() * 4);
    }
    return;
  }
  const int32_t* positions = in.at("positions").data<int32_t>();
  if (c.stage == Stage::query) {
    for (int64_t r = 0; r < c.bs; ++r) {
      const reference::IndexerQuery q = reference::indexer_query(query_of(in.at("q"), r, c.heads), positions[r],
                                                                 rope_freqs(), reference::IndexerQuant::fp8_per_head);
      for (int64_t h = 0; h < c.heads; ++h) {
        out.at("q_scale").set(r * c.heads + h, std::ldexp(1.0, q.scale_exp[static_cast<size_t>(h)]));
        for (int i = 0; i < kIndexerHeadDim; ++i)
          out.at("q_fp8").set((r * c.heads + h) * kIndexerHeadDim + i,
                              reference::fp8_e4m3_to_float(q.fp8[static_cast<size_t>(h * kIndexerHeadDim + i)]));
      }
    }
    return;
  }
  const uint8_t* codes = in.at("q_fp8").bytes();
  const uint8_t* cache = in.at("indexer_cache").bytes();
  for (int64_t r = 0; r < c.bs; ++r) {
    Eigen::MatrixXd q(c.heads, kIndexerHeadDim);
    Eigen::VectorXd w(c.heads);
    for (int64_t h = 0; h < c.heads; ++h) {
      w(h) = in.at("weights").get(r * c.heads + h);
      for (int i = 0; i < kIndexerHeadDim; ++i)
        q(h, i) = double{reference::fp8_e4m3_to_float(codes[(r * c.heads + h) * kIndexerHeadDim + i])} *
                  in.at("q_scale").get(r * c.heads + h);
    }
    const int64_t visible = reference::c4_visible(positions[r]);
    if (visible > s.width) throw BadInput("indexer: positions[" + std::to_string(r) + "] beyond the page table");
    Eigen::MatrixXd keys = Eigen::MatrixXd::Zero(s.width, kIndexerHeadDim);
    std::vector<float> key(kIndexerHeadDim);
    for (int64_t j = 0; j < visible; ++j) {
      const int64_t page = in.at("page_table").data<int32_t>()[r * s.pages + j / kC4EntriesPerPage];
      reference::indexer_unpack_entry(cache + page * s.cache_words * 4, kC4EntriesPerPage, j % kC4EntriesPerPage, key.data());
      for (int i = 0; i < kIndexerHeadDim; ++i) keys(j, i) = key[static_cast<size_t>(i)];
    }
    const Eigen::VectorXd scores = reference::indexer_scores(q, w, keys, visible);
    // Each score's terms' magnitudes, sum_h |w_h| sum_i |q_hi k_ji| = (|K| (|Q|^T |w|))_j (heads
    // whose dot relu zeroes count too: their rounding can move it across 0).
    const Eigen::VectorXd magnitudes = keys.cwiseAbs() * (q.cwiseAbs().transpose() * w.cwiseAbs());
    for (int64_t j = 0; j < s.width; ++j) {
      out.at("scores").set(r * s.width + j, scores(j));
      out.at("score_magnitudes").set(r * s.width + j, magnitudes(j));
    }
    const std::vector<int32_t> raw = reference::indexer_topk(scores, visible, c.index_topk);
    std::memcpy(out.at("topk_indices").data<int32_t>() + r * c.index_topk, raw.data(), raw.size() * 4);
  }
}

std::map<std::string, OutputCheck> checks(const IndexerCase& c) {
  // A score sums relu(q_h . k_j) w_h over the heads, each dot over 128 products: K = 128 heads terms.
  // The signs of w_h and of the products differ, so the sum cancels: compared per row (tolerance.h),
  // relative to the row's sums of the terms' magnitudes where those are larger (output_check.h):
  // a row whose scores cancel to near 0 (one visible entry, every dot near 0) has an fp32 error of
  // its terms' size, not of its result's.
  // On NVIDIA the tensor-core kernel (indexer_logits_mma.hip) sums in another order and, inside each
  // MMA, with the tensor core's own f32 accumulation, which PTX leaves unspecified; K and the class
  // stay. Its products are exact (e4m3 codes are exact f16, f16 x f16 is exact in f32); a head's dot
  // adds them in 8 MMA steps of 16 to the f32 accumulator. Were every step's 17 addends truncated at
  // 2^-23 of the largest and its sum truncated to f32 (no better than measured tensor cores), a step
  // would err by at most 36 u of its addends' magnitudes and a dot by at most 8 * 36 u of its
  // terms' (a step's C is at most the terms before it); with the heads' fp32 FMA chain of 8 and
  // butterfly of 8, about 300 u of the score's magnitudes: inside the row bound (4 sqrt(K) + 1) u =
  // 363 u at 64 heads, though not at 4 heads (91 u). The errors are far from that worst case:
  // replayed on every verify case, under round-to-nearest and under that truncating model
  // (tests/cpu/test_indexer_mma_reference.cpp), the kernel's scores use under 0.2% of the row bound
  // and under 3% of the mean-error bound; an accumulator of 14 significant bits (Hopper's e4m3 MMA)
  // fails both, hence the kernel's f16 MMA.
  const int64_t terms = kIndexerHeadDim * c.heads;
  if (c.stage == Stage::query)
    return {{"q_fp8", {ToleranceClass::fp8_quantised, Comparator::elementwise, 0, ""}},
            {"q_scale", {ToleranceClass::exact, Comparator::elementwise, 0, ""}}};
  if (c.stage == Stage::translate) return {};
  return {{"scores", {ToleranceClass::fp32_accumulated, Comparator::row_rel_l2, terms, "score_magnitudes"}},
          {"topk_indices", {ToleranceClass::fp32_accumulated, Comparator::topk_set, terms, "scores"}}};
}

// The magnitudes are the reference's own: no kernel writes them.
void unchecked(const IndexerCase&, TensorMap& outputs, Poison poison) {
  const auto it = outputs.find("score_magnitudes");
  if (it != outputs.end()) fill_poison(it->second, poison);
}

// A padding row is a request of one token (SGLang's padding: seq_len 1), which sees no entry.
// Rows are independent, so prefill rows pad alike. The pool grows to the bucket's pool (its
// pages depend on the rows) with zero pages nobody's table names: a graph captured at the bucket
// reads inputs of the bucket's shapes.
TensorMap pad_batch(const IndexerCase& c, const TensorMap& inputs, int64_t bucket) {
  if (bucket < c.bs) throw BadInput("indexer: bucket " + std::to_string(bucket) + " < bs " + std::to_string(c.bs));
  const Case bucket_case = c.untyped().with("bs", std::to_string(bucket));
  const int64_t pool_pages = sizes_of(IndexerCase(bucket_case)).pool_pages;
  TensorMap padded;
  for (const auto& [name, real] : inputs) {
    Shape shape = real.shape();
    if (name == "indexer_cache") {
      if (shape[0] > pool_pages)
        throw BadInput("indexer: indexer_cache of " + std::to_string(shape[0]) + " pages is larger than bucket " +
                       std::to_string(bucket) + "'s pool of " + std::to_string(pool_pages));
      shape[0] = pool_pages;
    } else {
      shape[0] = bucket;
    }
    HostTensor t(real.dtype(), shape);
    std::memcpy(t.bytes(), real.bytes(), real.nbytes());
    const int64_t from = real.numel();
    for (int64_t i = from; i < t.numel(); ++i) {
      if (name == "topk_indices") t.set(i, -1);
      else if (name == "q_scale") t.set(i, 1.0);
      else t.set(i, 0.0);
    }
    padded.emplace(name, std::move(t));
  }
  return padded;
}

WorkCount work(const IndexerCase& c, const TensorMap& inputs) {
  const Sizes s = sizes_of(c);
  const double qk = static_cast<double>(c.heads * kIndexerHeadDim);
  switch (c.stage) {
    case Stage::query:  // bf16 in, fp8 codes and scales out; 7 butterfly stages and the rope a value
      return {static_cast<double>(c.bs) * (qk * 3 + 4.0 * c.heads + 4), static_cast<double>(c.bs) * qk * 12};
    case Stage::translate: return {static_cast<double>(c.bs * c.index_topk) * 8 + static_cast<double>(c.bs * s.pages) * 4, 0};
    case Stage::select: break;
  }
  // Each visible entry's 132 bytes once, the query once, the scores and indices written.
  double visible = 0;
  for (int64_t r = 0; r < c.bs; ++r) visible += static_cast<double>(reference::c4_visible(inputs.at("positions").data<int32_t>()[r]));
  return {visible * reference::kIndexerEntryBytes + static_cast<double>(c.bs) * (qk + 12.0 * c.heads + 4) +
              static_cast<double>(c.bs) * (4.0 * s.width + 4.0 * c.index_topk),
          visible * qk * 2};
}

// Rows are independent; the pool is every row's, shared whole.
BatchSlice slice_batch(const IndexerCase& c, const TensorMap& inputs, int64_t begin, int64_t end) {
  BatchSlice slice{c.untyped().with("bs", std::to_string(end - begin)), {}, {}};
  for (const auto& [name, t] : inputs) slice.inputs.emplace(name, name == "indexer_cache" ? t : t.rows(begin, end));
  for (const auto& [name, t] : make_outputs(c)) slice.output_rows.emplace(name, begin);
  return slice;
}

#if DSV4H_GPU_LAYER
void launch(const IndexerCase& c, const DeviceTensorMap& in, DeviceTensorMap& out, void* stream_ptr) {
  const auto stream = static_cast<hipStream_t>(stream_ptr);
  const Sizes s = sizes_of(c);
  if (c.stage == Stage::query) {
    IndexerQueryArgs args{};
    args.q = in.data<const uint16_t>("q");
    args.positions = in.data<const int32_t>("positions");
    args.q_fp8 = nullptr;  // the harness compares the codes' values
    args.q_scale = out.data<float>("q_scale");
    args.q_fp8_values = out.data<float>("q_fp8");
    for (int i = 0; i < 32; ++i) args.freqs[i] = rope_freqs()(i);
    args.rows = c.bs;
    args.heads = c.heads;
    launch_indexer_query(args, stream);
    return;
  }
  if (c.stage == Stage::translate) {
    launch_indexer_page_slots({in.data<const int32_t>("topk_indices"), in.data<const int32_t>("page_table"),
                               out.data<int32_t>("page_indices"), c.bs, c.index_topk, s.pages},
                              stream);
    return;
  }
  IndexerLogitsArgs logits{};
  logits.q_fp8 = in.data<const uint8_t>("q_fp8");
  logits.q_scale = in.data<const float>("q_scale");
  logits.weights = in.data<const float>("weights");
  logits.positions = in.data<const int32_t>("positions");
  logits.page_table = in.data<const int32_t>("page_table");
  logits.cache = in.data<const uint8_t>("indexer_cache");
  logits.logits = out.data<float>("scores");
  logits.rows = c.bs;
  logits.heads = c.heads;
  logits.pages = s.pages;
  logits.pool_pages = in.at("indexer_cache").shape[0];
  launch_indexer_logits(logits, stream);
  launch_indexer_topk({out.data<const float>("scores"), in.data<const int32_t>("positions"),
                       out.data<int32_t>("topk_indices"), c.bs, s.width, c.index_topk},
                      stream);
}
#endif

}  // namespace

Component indexer_component() {
  Descriptor<Params> d;
  d.name = "indexer";
  d.summary = "C4 lightning indexer: fp8 query (rope, Hadamard), scores over the fp8 indexer cache, top-k, page slots (spec 3.3)";
  d.verify_cases = {
      // Spec 3.4's boundary lengths: p + 1 = 1..3 see no entry, 4 the first; pages of 64 entries.
      "indexer(bs=3,seq_len=1)", "indexer(bs=3,seq_len=2)", "indexer(bs=3,seq_len=3)", "indexer(bs=3,seq_len=4)",
      "indexer(bs=3,seq_len=5)", "indexer(bs=3,seq_len=127)", "indexer(bs=3,seq_len=128)", "indexer(bs=3,seq_len=129)",
      "indexer(bs=3,seq_len=255)", "indexer(bs=3,seq_len=256)", "indexer(bs=3,seq_len=257)",
      // c4 lengths index_topk - 1, index_topk (every entry, in order) and index_topk + 1 (top-k).
      "indexer(bs=2,ctx=4096,seq_len=2047)", "indexer(bs=2,ctx=4096,seq_len=2048)", "indexer(bs=2,ctx=4096,seq_len=2052)",
      "indexer(bs=2,ctx=8192,seq_len=4099,index_topk=1024)",
      // Random lengths; c4 lengths up to 16K (ctx 64K); 36 heads, a partial 16-head MMA tile
      // (indexer_logits_mma.hip); the tiny config truncating at 16.
      "indexer(bs=16,ctx=4096)", "indexer(bs=6,ctx=4096,heads=36)", "indexer(bs=2,ctx=65536,seq_len=65536)", "indexer(bs=5,ctx=65536)",
      "indexer(bs=4,ctx=68,seq_len=63,heads=4,index_topk=16)", "indexer(bs=4,ctx=68,seq_len=64,heads=4,index_topk=16)",
      "indexer(bs=4,ctx=68,seq_len=68,heads=4,index_topk=16)", "indexer(bs=33,ctx=600,heads=4,index_topk=16)",
      // Prefill rows: every p + 1 from 1 to 300 in one request; c4 lengths 460..524 across 512.
      "indexer(bs=300,ctx=300,seq_len=300,per_request=300,heads=4,index_topk=16)",
      "indexer(bs=260,ctx=2100,seq_len=2100,per_request=260,heads=4)",
      // The query path, positions up to 64K (the rope's angles grow with them).
      "indexer(stage=1,bs=1)", "indexer(stage=1,bs=7,ctx=65536)", "indexer(stage=1,bs=64,ctx=1048576,heads=4)",
      // The page translation: empty rows, every entry, top-k of long rows.
      "indexer(stage=2,bs=9,ctx=600)", "indexer(stage=2,bs=4,ctx=65536)", "indexer(stage=2,bs=3,ctx=68,index_topk=16)",
  };
  d.batch_param = "bs";
  d.replay_case = "indexer(bs=1,ctx=4096)";
  d.mutants = {
      DSV4H_MUTANT(indexer_mask_off_by_one, "indexer_logits.hip indexer_logits_mma.hip indexer_topk.hip", "causal mask j <= (p+1)/4: one entry too many visible"),
      DSV4H_MUTANT(indexer_topk_padded_width, "indexer_topk.hip", "top-k over the padded width instead of the row's visible entries"),
      DSV4H_MUTANT(indexer_page_128, "indexer_page_slots.hip", "page translation with 128 entries a page instead of 64"),
  };
  d.gpu_tests = "*IndexerGpu*";
  d.bench_binary = "bench_indexer";
  d.bench_filter = "BM_indexer|BM_copy_same_bytes_indexer|BM_copy_kernel_same_bytes_indexer";
  // Issue 29's goals (ci/goals.py judges them), over the peers' shapes (tests/peers/indexer.py:
  // bs 1, 8, 64, 128 at ctx 8K and 64K). The peers' run also measures the floors: floor_us is the
  // larger of a copy of the chain's bytes and an fp8 GEMM (torch._scaled_mm) of its FLOPs, the
  // dense fp8 rate, as no fp8 tensor-core kernel is in this tree. As the issue says, the floor goal
  // holds at ctx 64K and the 4x goal at bs >= 64 (the peers' bs 64 and 128); "ahead of every peer"
  // is against the torch and Triton times only (the results' copy_us, fp8_dense_us and floor_us are
  // floors, not peers).
  d.goals = R"json([
    {"text": "indexer decode bs={bs} ctx={ctx}: within 2x the larger of its byte and FLOP floors ({peer:.1f} us)",
     "measure": "faster_than_peer", "bound": 2.0, "peers": "peers.indexer", "against": "floor_us",
     "where": {"ctx": 65536}, "benchmark": "BM_indexer_decode/bs:{bs}/ctx:{ctx}/manual_time"},
    {"text": "indexer decode bs={bs} ctx={ctx}: ahead of every peer", "measure": "faster_than_peers", "bound": 1.0,
     "peers": "peers.indexer", "against": ["eager_us", "compile_us", "triton_us"], "where": {"tokens": null},
     "benchmark": "BM_indexer_decode/bs:{bs}/ctx:{ctx}/manual_time"},
    {"text": "indexer prefill tokens={tokens}: ahead of every peer", "measure": "faster_than_peers", "bound": 1.0,
     "peers": "peers.indexer", "against": ["eager_us", "compile_us", "triton_us"], "where": {"bs": null},
     "benchmark": "BM_indexer_prefill/tokens:{tokens}/manual_time"},
    {"text": "indexer decode bs={bs} ctx={ctx}: >= 4x faster than torch {kind} ({peer:.1f} us)", "measure": "faster_than_peer",
     "bound": 0.25, "peers": "peers.indexer", "against": "{kind}_us", "where": {"bs": [64, 128]},
     "benchmark": "BM_indexer_decode/bs:{bs}/ctx:{ctx}/manual_time", "each": [[{"kind": "eager"}, {"kind": "compile"}]]}
  ])json";
  d.make_inputs = make_inputs;
  d.validate_inputs = validate_inputs;
  d.make_outputs = make_outputs;
  d.reference = run_reference;
  d.checks = checks;
  d.pad_batch = pad_batch;
  d.unchecked = unchecked;
  d.work = work;
  d.slice_batch = slice_batch;
  d.relation_cases = {
      "batch_invariance(chunks=3):indexer(bs=16,ctx=4096)",
      "batch_invariance(chunks=2):indexer(stage=1,bs=8,ctx=65536)",
      "batch_invariance(chunks=3):indexer(stage=2,bs=9,ctx=65536)",
  };
#if DSV4H_GPU_LAYER
  d.gpu = launch;
#endif
  return erase(std::move(d));
}

}  // namespace dsv4h
