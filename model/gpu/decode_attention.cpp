// The batched decode step's attention layer (decode_graph.h): the same ops as the per-request
// attention.cpp, each row at its own position, its indices and locations read from the step's
// metadata (built on the device), its pools the batch's shared ones. Nothing here synchronises,
// copies to or from the host or allocates after the step's first run.
#include <algorithm>
#include <cmath>

#include "decode_graph.h"
#include "glue_kernels.h"
#include "kernels/compressor.h"
#include "kernels/indexer.h"
#include "kernels/kv_pool.h"
#include "kernels/sparse_attention.h"
#include "reference/attn_metadata.h"
#include "reference/compressor.h"
#include "reference/kv_cache_model1.h"
#include "reference/rope.h"

namespace dsv4h::model::gpu {

void GpuForward::step_compress(DecodeBucket& b, int64_t layer, const std::string& p, int64_t dims, const float* xf, uint8_t* pool,
                               int64_t pool_slots, const int32_t* out_loc, DeviceBytes& ring, DeviceBytes& ring_out) const {
  const int64_t B = b.rows(), ratio = c_.compress_ratios[layer];
  const int64_t width = reference::compressor_series(static_cast<int>(ratio)) * dims;
  float* kv = b.take<float>(B * width);
  float* score = b.take<float>(B * width);
  gemm(xf, Dtype::f32, c_.dim, f32(p + "wkv.weight"), c_.dim, kv, Dtype::f32, width, B, c_.dim, width);
  gemm(xf, Dtype::f32, c_.dim, f32(p + "wgate.weight"), c_.dim, score, Dtype::f32, width, B, c_.dim, width);
  // The kernel writes only the rows of the step's tokens into ring_out: the rest of the step's
  // rings carried over, and those rings copied back into `ring`, where the next step (the same
  // graph) reads them. Other requests' rings are neither read nor written.
  RingCopyArgs carry;
  carry.src = ring.as<float>();
  carry.dst = ring_out.as<float>();
  carry.ring_index = b.ring_index.as<int32_t>();
  carry.extend_len = b.extend_lens.as<int32_t>();
  carry.batch = B;
  carry.rows_per_ring = reference::compressor_ring_rows(static_cast<int>(ratio));
  carry.row_floats = 2 * width;
  launch_copy_rings(carry, stream_);
  CompressorArgs a;
  a.kv = kv;
  a.score = score;
  a.ape = f32(p + "ape");
  a.norm_weight = f32(p + "norm.weight");
  a.ring = ring.as<float>();
  a.start = b.meta.positions_casual;
  a.extend_len = b.extend_lens.as<int32_t>();
  a.ring_index = b.ring_index.as<int32_t>();
  a.out_loc = out_loc;
  a.pool = pool;
  a.ring_out = ring_out.as<float>();
  a.ratio = ratio;
  a.dims = dims;
  a.batch = B;
  a.tokens = 1;
  a.pool_slots = pool_slots;
  launch_compressor(a, stream_);
  carry.src = ring_out.as<float>();
  carry.dst = ring.as<float>();
  launch_copy_rings(carry, stream_);
}

uint16_t* GpuForward::step_attention(DecodeBucket& b, const BatchPools& pools, int64_t layer, const std::string& p,
                                     const uint16_t* x) const {
  const int64_t B = b.rows(), H = c_.n_heads, Hp = (H + kHeadBlock - 1) / kHeadBlock * kHeadBlock, dim = c_.dim;
  const int64_t ratio = c_.compress_ratios[layer], full_pages = pools.layout.full_pages();
  SharedLayerPools& pool = const_cast<SharedLayerPools&>(pools.layers[static_cast<size_t>(layer)]);
  const AttnMetadataBuffers& meta = b.meta;
  const Eigen::VectorXd freqs = reference::rope_frequencies(c_.rope(layer));
  const auto rope_args = [&](const uint16_t* in, uint16_t* out, int64_t heads, int64_t out_heads, bool norm) {
    gpu::HeadRopeArgs a{};
    a.x = in, a.out = out, a.T = B, a.heads = heads, a.out_heads = out_heads, a.positions = meta.positions_casual, a.norm = norm;
    a.eps = c_.norm_eps;
    for (int i = 0; i < 32; ++i) a.freqs[i] = freqs(i);
    return a;
  };

  // Projections; q's per-head norm and rope into heads padded to 16.
  const auto linear = [&](const void* in, const std::string& w, const std::string& op) {
    return static_cast<const uint16_t*>(step_linear(b, in, B, p + w, Dtype::bf16, 1.f, op.empty() ? "" : p + op));
  };
  const uint16_t* qa = linear(x, "wq_a.weight", "wq_a");
  const uint16_t* qr = step_norm(b, qa, B, c_.q_lora_rank, p + "q_norm.weight", p + "q_norm");
  const uint16_t* qb = linear(qr, "wq_b.weight", "wq_b");
  uint16_t* q = b.take<uint16_t>(B * Hp * kDims);
  gpu::launch_head_rope(rope_args(qb, q, H, Hp, true), stream_);
  b.record(p + "q_rope", {{"q", {q, Dtype::bf16, B, H * kDims, Hp * kDims}}});

  // The latent: norm, rope, the MODEL1 store at the step's translated location, read back at the
  // row's own slot (raw_out_loc: the SWA pool is the full pool), where attention will read it.
  const uint16_t* kv = linear(x, "wkv.weight", "wkv");
  const uint16_t* kvn = step_norm(b, kv, B, kDims, p + "kv_norm.weight", p + "kv_norm");
  uint16_t* latent = b.take<uint16_t>(B * kDims);
  gpu::launch_head_rope(rope_args(kvn, latent, 1, 1, false), stream_);
  const int64_t swa_page_bytes = reference::model1_page_bytes(kSwaPageTokens);
  const KvPoolBuffer swa{pool.swa.as<uint8_t>(), 1, full_pages, kSwaPageTokens, swa_page_bytes};
  KvPoolSet set;
  set.swa = swa;
  set.translation_cache = b.translation_cache.as<int32_t>();
  KvStepLocations loc{};
  loc.tokens = B;
  loc.swa_out_loc = b.swa_out_loc.as<int32_t>();
  KvLayerStore store;
  store.layer_id = static_cast<int>(layer);
  store.kv = latent;
  launch_kv_store_layer(set, loc, store, stream_);
  uint16_t* cached = b.take<uint16_t>(B * kDims);
  launch_kv_gather_model1(swa, 0, meta.raw_out_loc, B, cached, stream_);
  b.record(p + "kv_cache", {{"latent", {cached, Dtype::bf16, B, kDims, kDims}}});

  // The compressors: the main entries into the C4 / C128 pool, the indexer's keys into its pool,
  // at the metadata's locations (0, the sink, for a token that completes none).
  const float* xf = nullptr;
  if (ratio != 0) {
    float* widened = b.take<float>(B * dim);
    gpu::launch_bf16_to_f32(x, B * dim, widened, stream_);
    xf = widened;
    step_compress(b, layer, p + "compressor.", kDims, xf, pool.comp.as<uint8_t>(), full_pages * pool.comp_page_entries,
                  ratio == 4 ? meta.c4_out_loc : meta.c128_out_loc, pool.ring, pool.ring_out);
    b.record(p + "compress", {}, StepOpKind::main_entry, layer);
  }

  // The lightning indexer (C4): keys, fp8 queries, head weights, scores and top-k over the pool
  // through the metadata's page table, then the top-k's page slots into the metadata's
  // c4_sparse_page_indices (each C4 layer overwrites them before its attention reads them).
  const int64_t topk = c_.index_topk, nI = c_.index_n_heads;
  if (ratio == 4) {
    step_compress(b, layer, p + "indexer.compressor.", kIndexDims, xf, pool.index.as<uint8_t>(), full_pages * kC4PageEntries,
                  meta.c4_out_loc, pool.index_ring, pool.index_ring_out);
    b.record(p + "indexer.compress", {}, StepOpKind::index_entry, layer);
    const uint16_t* qi = linear(qr, "indexer.wq_b.weight", "");
    uint8_t* q_fp8 = b.take<uint8_t>(B * nI * kIndexDims);
    float* q_scale = b.take<float>(B * nI);
    float* q_values = b.take<float>(B * nI * kIndexDims);
    IndexerQueryArgs qa_args{};
    qa_args.q = qi;
    qa_args.positions = meta.positions_casual;
    qa_args.q_fp8 = q_fp8;
    qa_args.q_scale = q_scale;
    qa_args.q_fp8_values = q_values;
    for (int i = 0; i < 32; ++i) qa_args.freqs[i] = freqs(i);
    qa_args.rows = B;
    qa_args.heads = nI;
    launch_indexer_query(qa_args, stream_);
    b.record(p + "indexer.q", {{"q", {q_values, Dtype::f32, B, nI * kIndexDims, nI * kIndexDims}}, {"scale", {q_scale, Dtype::f32, B, nI, nI}}},
             StepOpKind::scaled_q, layer);
    const float weight_scale = static_cast<float>(1 / std::sqrt(static_cast<double>(kIndexDims)) / std::sqrt(static_cast<double>(nI)));
    const float* head_weights =
        static_cast<const float*>(step_linear(b, x, B, p + "indexer.weights_proj.weight", Dtype::f32, weight_scale, p + "indexer.weights", "weights"));
    const int64_t width = meta.page_cols * kC4PageEntries;
    float* logits = b.take<float>(B * width);
    int32_t* indices = b.take<int32_t>(B * topk);
    IndexerLogitsArgs la{};
    la.q_fp8 = q_fp8;
    la.q_scale = q_scale;
    la.weights = head_weights;
    la.positions = meta.positions_casual;
    la.page_table = meta.page_table;
    la.cache = pool.index.as<uint8_t>();
    la.logits = logits;
    la.rows = B;
    la.heads = nI;
    la.pages = meta.page_cols;
    la.pool_pages = full_pages;
    launch_indexer_logits(la, stream_);
    launch_indexer_topk({logits, meta.positions_casual, indices, B, width, topk}, stream_);
    b.record(p + "index_select", {{"indices", {indices, Dtype::i32, B, topk, topk}, OpValues::index}}, StepOpKind::selection, layer);
    launch_indexer_page_slots({indices, meta.page_table, meta.c4_sparse_page_indices, B, topk, meta.page_cols}, stream_);
  }

  // Sparse attention over the window and the C128 entries or the indexer's choice.
  SparseAttentionArgs a;
  a.q = q;
  a.window = {pool.swa.as<uint8_t>(), kSwaPageTokens, meta.swa_page_indices, reference::kSwaWindow, meta.swa_topk_lengths};
  if (ratio == 128)
    a.extra = {pool.comp.as<uint8_t>(), pool.comp_page_entries, meta.c128_page_indices, meta.c128_cols, meta.c128_topk_lengths_clamp1};
  else if (ratio == 4)
    a.extra = {pool.comp.as<uint8_t>(), pool.comp_page_entries, meta.c4_sparse_page_indices, topk, meta.c4_sparse_topk_lengths};
  std::vector<float> sink(static_cast<size_t>(Hp), 0.f);
  const std::vector<float>& sink_weights = sinks(p);
  std::copy(sink_weights.begin(), sink_weights.begin() + H, sink.begin());
  a.sink = b.constant(sink);
  uint16_t* o = b.take<uint16_t>(B * Hp * kDims);
  a.positions = meta.positions_casual;
  a.out = o;
  a.lse = b.take<float>(B * Hp);
  a.scratch = b.split_scratch(B * Hp, a.scratch_floats);
  a.rows = B;
  a.heads = Hp;
  a.compress_ratio = ratio;
  launch_sparse_attention(a, stream_);
  b.record(p + "attend", {{"o", {o, Dtype::bf16, B, H * kDims, Hp * kDims}}});

  // The grouped output projection: group g's heads (a strided view of o) through its wo_a rows.
  const int64_t G = c_.o_groups, r = c_.o_lora_rank, group_in = c_.heads_per_group() * kDims;
  uint16_t* og = b.take<uint16_t>(B * G * r);
  const uint16_t* wo_a = bf16(p + "wo_a.weight");
  for (int64_t g = 0; g < G; ++g)
    gemm(o + g * group_in, Dtype::bf16, Hp * kDims, wo_a + g * r * group_in, group_in, og + g * r, Dtype::bf16, G * r, B, group_in, r);
  b.record(p + "wo_a", {{"y", {og, Dtype::bf16, B, G * r, G * r}}});
  return static_cast<uint16_t*>(step_linear(b, og, B, p + "wo_b.weight", Dtype::bf16, 1.f, p + "wo_b"));
}

}  // namespace dsv4h::model::gpu
