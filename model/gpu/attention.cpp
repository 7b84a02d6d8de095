// The GPU forward's attention layer (forward_impl.h): projections, q's and the latent's norms and
// rope, the SWA store, the compressors, the lightning indexer (C4) and sparse attention, then the
// grouped output projection.
#include "forward_impl.h"

#include <algorithm>
#include <cmath>

#include "glue_kernels.h"
#include "kernels/indexer.h"
#include "kernels/kv_pool.h"
#include "kernels/sparse_attention.h"
#include "reference/kv_cache_model1.h"
#include "reference/rope.h"

namespace dsv4h::model::gpu {

GpuForward::Buf GpuForward::attention(int64_t layer, const std::string& p, const Buf& x, int64_t T, LayerState& cache,
                                      bool prefill) const {
  const int64_t H = c_.n_heads, Hp = (H + kHeadBlock - 1) / kHeadBlock * kHeadBlock, dim = c_.dim;
  const int64_t first_pos = cache.length, ratio = cache.ratio;
  const Eigen::VectorXd freqs = reference::rope_frequencies(c_.rope(layer));
  std::vector<int32_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[static_cast<size_t>(t)] = static_cast<int32_t>(first_pos + t);
  const Buf d_positions = upload(positions);
  const auto rope_args = [&](const uint16_t* in, uint16_t* out, int64_t heads, int64_t out_heads, bool norm) {
    gpu::HeadRopeArgs a{};
    a.x = in, a.out = out, a.T = T, a.heads = heads, a.out_heads = out_heads, a.first_pos = first_pos, a.norm = norm;
    a.eps = c_.norm_eps;
    for (int i = 0; i < 32; ++i) a.freqs[i] = freqs(i);
    return a;
  };

  // Projections; q's per-head norm and rope into heads padded to 16.
  const Buf qa = report_linear(x.as<uint16_t>(), T, p + "wq_a.weight", p + "wq_a");
  const Buf qr = report_norm(qa.as<uint16_t>(), T, c_.q_lora_rank, p + "q_norm.weight", p + "q_norm");
  const Buf qb = report_linear(qr.as<uint16_t>(), T, p + "wq_b.weight", p + "wq_b");
  Buf q = device_array<uint16_t>(T * Hp * kDims);
  gpu::launch_head_rope(rope_args(qb.as<uint16_t>(), q.as<uint16_t>(), H, Hp, true), stream_);
  report(p + "q_rope", {{"q", {q.as<void>(), Dtype::bf16, T, H * kDims, Hp * kDims}}});

  // The latent: norm, rope, the MODEL1 store into the SWA pool (slot 256 + position), read back.
  const Buf kv = report_linear(x.as<uint16_t>(), T, p + "wkv.weight", p + "wkv");
  const Buf kvn = report_norm(kv.as<uint16_t>(), T, kDims, p + "kv_norm.weight", p + "kv_norm");
  Buf latent = device_array<uint16_t>(T * kDims);
  gpu::launch_head_rope(rope_args(kvn.as<uint16_t>(), latent.as<uint16_t>(), 1, 1, false), stream_);
  const int64_t swa_page_bytes = reference::model1_page_bytes(kSwaPageTokens);
  std::vector<int32_t> swa_slots(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) swa_slots[static_cast<size_t>(t)] = static_cast<int32_t>(cache.first_page * kSwaPageTokens + first_pos + t);
  uint8_t* swa = cache.swa.as<uint8_t>();
  store_model1(swa, cache.swa_pages, kSwaPageTokens, swa_page_bytes, latent.as<uint16_t>(), swa_slots);
  Buf cached;
  gather_model1(swa, cache.swa_pages, kSwaPageTokens, swa_page_bytes, swa_slots, cached);
  report(p + "kv_cache", {{"latent", {cached.as<void>(), Dtype::bf16, T, kDims, kDims}, OpValues::real,
                           [&](const RowMatrix& m) {
                             const Buf rows = upload(to_bf16(m.data(), static_cast<size_t>(m.size())));
                             store_model1(swa, cache.swa_pages, kSwaPageTokens, swa_page_bytes, rows.as<uint16_t>(), swa_slots);
                           }}});
  cache.length += T;
  const int64_t visible_last = ratio == 0 ? 0 : (first_pos + T) / ratio;

  // The compressors: the main entries into the C4 / C128 pool, the indexer's keys into its pool.
  Buf xf;
  if (ratio != 0) {
    xf = device_array<float>(T * dim);
    gpu::launch_bf16_to_f32(x.as<uint16_t>(), T * dim, xf.as<float>(), stream_);
    compress(layer, p + "compressor.", kDims, xf, T, first_pos, cache.comp.as<uint8_t>(), cache.comp_pages * cache.comp_page_entries,
             cache.first_page * cache.comp_page_entries, cache.ring_slot, cache.ring, cache.ring_out);
    std::vector<int32_t> slots;
    for (int64_t j = cache.entries; j < visible_last; ++j) slots.push_back(static_cast<int32_t>(cache.first_page * cache.comp_page_entries + j));
    Buf entries;
    gather_model1(cache.comp.as<uint8_t>(), cache.comp_pages, cache.comp_page_entries, cache.comp_page_bytes, slots, entries);
    report(p + "compress", {{"entries", {entries.as<void>(), Dtype::bf16, static_cast<int64_t>(slots.size()), kDims, kDims},
                             OpValues::real, [&](const RowMatrix& m) {
                               const Buf rows = upload(to_bf16(m.data(), static_cast<size_t>(m.size())));
                               store_model1(cache.comp.as<uint8_t>(), cache.comp_pages, cache.comp_page_entries,
                                            cache.comp_page_bytes, rows.as<uint16_t>(), slots);
                             }}});
    cache.entries = visible_last;
  }

  // The lightning indexer (C4): keys, fp8 queries, head weights, scores and top-k over its pool.
  const int64_t W = std::min(c_.index_topk, visible_last), topk = c_.index_topk;
  Buf page_slots;
  if (ratio == 4) {
    const int64_t index_pages = cache.index_pool_pages, nI = c_.index_n_heads;
    compress(layer, p + "indexer.compressor.", kIndexDims, xf, T, first_pos, cache.index.as<uint8_t>(),
             index_pages * kC4PageEntries, cache.first_page * kC4PageEntries, cache.ring_slot, cache.index_ring, cache.index_ring_out);
    std::vector<int32_t> slots;
    for (int64_t j = cache.index_entries; j < visible_last; ++j) slots.push_back(static_cast<int32_t>(cache.first_page * kC4PageEntries + j));
    const int64_t n = static_cast<int64_t>(slots.size());
    Buf keys = device_array<float>(n * kIndexDims);
    const KvPoolBuffer index_pool{cache.index.as<uint8_t>(), 1, index_pages, kC4PageEntries, kC4PageEntries * kIndexerEntryBytes};
    if (n > 0) {
      const Buf loc = upload(slots);
      launch_kv_gather_indexer(index_pool, 0, loc.as<int32_t>(), n, keys.as<float>(), stream_);
      DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
    }
    const DeviceView keys_view{keys.as<void>(), Dtype::f32, n, kIndexDims, kIndexDims};
    report(p + "indexer.compress", {{"keys", keys_view, OpValues::real, nullptr, [&] { return download(keys_view, stream_); }}});
    cache.index_entries = visible_last;

    const Buf qi = linear(qr.as<uint16_t>(), T, p + "indexer.wq_b.weight", Dtype::bf16);
    Buf q_fp8 = device_array<uint8_t>(T * nI * kIndexDims), q_scale = device_array<float>(T * nI);
    Buf q_values = device_array<float>(T * nI * kIndexDims);
    IndexerQueryArgs qa_args{};
    qa_args.q = qi.as<uint16_t>();
    qa_args.positions = d_positions.as<int32_t>();
    qa_args.q_fp8 = q_fp8.as<uint8_t>();
    qa_args.q_scale = q_scale.as<float>();
    qa_args.q_fp8_values = q_values.as<float>();
    for (int i = 0; i < 32; ++i) qa_args.freqs[i] = freqs(i);
    qa_args.rows = T;
    qa_args.heads = nI;
    launch_indexer_query(qa_args, stream_);
    const auto scaled_q = [&] {  // the codes' values times their (row, head) scale
      RowMatrix v = download({q_values.as<void>(), Dtype::f32, T, nI * kIndexDims, nI * kIndexDims}, stream_);
      const RowMatrix s = download({q_scale.as<void>(), Dtype::f32, T, nI, nI}, stream_);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < nI; ++h) v.row(t).segment(h * kIndexDims, kIndexDims) *= s(t, h);
      return v;
    };
    report(p + "indexer.q", {{"q", {q_values.as<void>(), Dtype::f32, T, nI * kIndexDims, nI * kIndexDims}, OpValues::real, nullptr,
                              scaled_q}});
    const float weight_scale = static_cast<float>(1 / std::sqrt(static_cast<double>(kIndexDims)) / std::sqrt(static_cast<double>(nI)));
    const Buf head_weights = report_linear(x.as<uint16_t>(), T, p + "indexer.weights_proj.weight", p + "indexer.weights",
                                           Dtype::f32, weight_scale, "weights");

    std::vector<int32_t> table(static_cast<size_t>(T * cache.c4_pages));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t g = 0; g < cache.c4_pages; ++g) table[static_cast<size_t>(t * cache.c4_pages + g)] = static_cast<int32_t>(cache.first_page + g);
    const Buf page_table = upload(table);
    const int64_t width = cache.c4_pages * kC4PageEntries;
    Buf logits = device_array<float>(T * width), indices = device_array<int32_t>(T * topk);
    IndexerLogitsArgs la{};
    la.q_fp8 = q_fp8.as<uint8_t>();
    la.q_scale = q_scale.as<float>();
    la.weights = head_weights.as<float>();
    la.positions = d_positions.as<int32_t>();
    la.page_table = page_table.as<int32_t>();
    la.cache = cache.index.as<uint8_t>();
    la.logits = logits.as<float>();
    la.rows = T;
    la.heads = nI;
    la.pages = cache.c4_pages;
    la.pool_pages = index_pages;
    launch_indexer_logits(la, stream_);
    launch_indexer_topk({logits.as<float>(), d_positions.as<int32_t>(), indices.as<int32_t>(), T, width, topk}, stream_);
    // Reported as the reference's: each row's entries ascending, -1 after, min(topk, visible) wide.
    const DeviceView raw{indices.as<void>(), Dtype::i32, T, topk, topk};
    const auto selected = [&] {
      const RowMatrix all = download(raw, stream_);
      RowMatrix s = RowMatrix::Constant(T, W, -1);
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> row;
        for (int64_t j = 0; j < topk; ++j)
          if (all(t, j) >= 0) row.push_back(all(t, j));
        std::sort(row.begin(), row.end());
        for (size_t j = 0; j < row.size() && static_cast<int64_t>(j) < W; ++j) s(t, static_cast<int64_t>(j)) = row[j];
      }
      return s;
    };
    report(p + "index_select", {{"indices", raw, OpValues::index, [&](const RowMatrix& m) {
                                   RowMatrix full = RowMatrix::Constant(T, topk, -1);
                                   full.leftCols(W) = m;
                                   write_back(full, raw, stream_);
                                 },
                                 selected}});
    page_slots = device_array<int32_t>(T * topk);
    launch_indexer_page_slots({indices.as<int32_t>(), page_table.as<int32_t>(), page_slots.as<int32_t>(), T, topk, cache.c4_pages},
                              stream_);
    DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
  }

  // Sparse attention: the window (slots 256 + s), and the C128 entries or the indexer's choice.
  const int64_t window = c_.window_size;
  std::vector<int32_t> swa_indices(static_cast<size_t>(T * window), -1), swa_lengths(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = first_pos + t, from = std::max<int64_t>(0, pos - window + 1);
    for (int64_t s = from; s <= pos; ++s) swa_indices[static_cast<size_t>(t * window + s - from)] = static_cast<int32_t>(cache.first_page * kSwaPageTokens + s);
    swa_lengths[static_cast<size_t>(t)] = static_cast<int32_t>(pos - from + 1);
  }
  const Buf d_swa_indices = upload(swa_indices), d_swa_lengths = upload(swa_lengths);
  SparseAttentionArgs a;
  a.q = q.as<uint16_t>();
  a.window = {swa, kSwaPageTokens, d_swa_indices.as<int32_t>(), window, d_swa_lengths.as<int32_t>()};
  Buf d_extra_indices, d_extra_lengths;
  if (ratio == 128) {
    const int64_t width = std::max<int64_t>(1, visible_last);
    std::vector<int32_t> idx(static_cast<size_t>(T * width), -1), len(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      const int64_t n = (first_pos + t + 1) / 128;
      for (int64_t j = 0; j < n; ++j) idx[static_cast<size_t>(t * width + j)] = static_cast<int32_t>(cache.first_page * cache.comp_page_entries + j);
      len[static_cast<size_t>(t)] = static_cast<int32_t>(n);
    }
    d_extra_indices = upload(idx), d_extra_lengths = upload(len);
    a.extra = {cache.comp.as<uint8_t>(), cache.comp_page_entries, d_extra_indices.as<int32_t>(), width, d_extra_lengths.as<int32_t>()};
  } else if (ratio == 4) {
    d_extra_lengths = upload(std::vector<int32_t>(static_cast<size_t>(T), static_cast<int32_t>(topk)));
    a.extra = {cache.comp.as<uint8_t>(), cache.comp_page_entries, page_slots.as<int32_t>(), topk, d_extra_lengths.as<int32_t>()};
  }
  std::vector<float> sink(static_cast<size_t>(Hp), 0.f);
  const std::vector<float>& sink_weights = sinks(p);
  std::copy(sink_weights.begin(), sink_weights.begin() + H, sink.begin());
  const Buf d_sink = upload(sink);
  Buf o = device_array<uint16_t>(T * Hp * kDims), lse = device_array<float>(T * Hp);
  const int64_t splits = sparse_attention_splits(window, ratio == 0 ? 0 : a.extra.width);
  Buf scratch = device_array<float>(prefill || splits == 1 ? 1 : T * Hp * splits * 514);
  a.sink = d_sink.as<float>();
  a.positions = d_positions.as<int32_t>();
  a.out = o.as<uint16_t>();
  a.lse = lse.as<float>();
  a.scratch = scratch.as<float>();
  a.scratch_floats = static_cast<int64_t>(scratch.bytes() / sizeof(float));
  a.rows = T;
  a.heads = Hp;
  a.compress_ratio = ratio;
  if (prefill)
    launch_sparse_attention_prefill(a, stream_);
  else
    launch_sparse_attention(a, stream_);
  report(p + "attend", {{"o", {o.as<void>(), Dtype::bf16, T, H * kDims, Hp * kDims}}});

  // The grouped output projection: group g's heads (a strided view of o) through its wo_a rows.
  const int64_t G = c_.o_groups, r = c_.o_lora_rank, group_in = c_.heads_per_group() * kDims;
  Buf og = device_array<uint16_t>(T * G * r);
  const uint16_t* wo_a = bf16(p + "wo_a.weight");
  for (int64_t g = 0; g < G; ++g)
    gemm(o.as<uint16_t>() + g * group_in, Dtype::bf16, Hp * kDims, wo_a + g * r * group_in, group_in, og.as<uint16_t>() + g * r,
         Dtype::bf16, G * r, T, group_in, r);
  report(p + "wo_a", {{"y", {og.as<void>(), Dtype::bf16, T, G * r, G * r}}});
  Buf out = report_linear(og.as<uint16_t>(), T, p + "wo_b.weight", p + "wo_b");
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));  // the call's host-made indices are freed on return
  return out;
}

}  // namespace dsv4h::model::gpu
