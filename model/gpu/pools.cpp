// The GPU forward's per-request pools (forward_impl.h): a layer's SWA, compressed and indexer
// pools with the compressors' rings, MODEL1 stores and gathers through host-made slots, and one
// compressor step.
#include "forward_impl.h"

#include <utility>

#include "kernels/compressor.h"
#include "kernels/kv_pool.h"
#include "reference/compressor.h"
#include "reference/kv_cache_model1.h"

namespace dsv4h::model::gpu {

LayerState GpuForward::new_layer(int64_t layer, int64_t capacity) const {
  LayerState s;
  s.ratio = c_.compress_ratios[layer];
  s.swa_pages = 1 + (capacity + kSwaPageTokens - 1) / kSwaPageTokens;
  s.swa = DeviceBytes(static_cast<size_t>(s.swa_pages * reference::model1_page_bytes(kSwaPageTokens)));
  if (s.ratio == 0) return s;
  const auto clean_rings = [](int ratio, int dims, Buf& ring, Buf& ring_out) {
    // Rings of the compressor's batch layout: ring 0 (padding's) and ring 1, this request's.
    const reference::RowMatrixXf clean = reference::compressor_clean_ring({ratio, dims});
    std::vector<float> rows;
    for (int copy = 0; copy < 2; ++copy)
      for (int64_t r = 0; r < clean.rows(); ++r)
        for (int64_t k = 0; k < clean.cols(); ++k) rows.push_back(clean(r, k));
    ring = upload(rows);
    ring_out = upload(rows);
  };
  const int64_t entries = capacity / s.ratio;
  const CompressorPoolPages pages = compressor_pool_pages(s.ratio, kDims);
  s.comp_page_entries = pages.entries;
  s.comp_page_bytes = pages.bytes;
  s.comp_pages = 1 + (entries + pages.entries - 1) / pages.entries;
  s.comp = DeviceBytes(static_cast<size_t>(s.comp_pages * pages.bytes));
  clean_rings(static_cast<int>(s.ratio), static_cast<int>(kDims), s.ring, s.ring_out);
  if (s.ratio == 4) {
    // The indexer's pages: every row's page table is 1 .. c4_pages, at least one page.
    s.c4_pages = std::max<int64_t>(1, (entries + kC4PageEntries - 1) / kC4PageEntries);
    s.index_pool_pages = 1 + s.c4_pages;
    s.index = DeviceBytes(static_cast<size_t>(s.index_pool_pages * kC4PageEntries * kIndexerEntryBytes));
    clean_rings(4, static_cast<int>(kIndexDims), s.index_ring, s.index_ring_out);
  }
  return s;
}

void GpuForward::store_model1(uint8_t* pool, int64_t pages, int64_t page_entries, int64_t page_bytes, const uint16_t* rows,
                              const std::vector<int32_t>& slots) const {
  if (slots.empty()) return;
  const Buf loc = upload(slots);
  KvPoolSet pools;
  pools.swa = {pool, 1, pages, page_entries, page_bytes};
  KvStepLocations step;
  step.tokens = static_cast<int64_t>(slots.size());
  step.swa_out_loc = loc.as<int32_t>();
  KvLayerStore layer;
  layer.kv = rows;
  launch_kv_store_layer(pools, step, layer, stream_);
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));  // `loc` is freed on return
}

void GpuForward::gather_model1(uint8_t* pool, int64_t pages, int64_t page_entries, int64_t page_bytes,
                               const std::vector<int32_t>& slots, Buf& out) const {
  out = device_array<uint16_t>(static_cast<int64_t>(slots.size()) * kDims);
  if (slots.empty()) return;
  const Buf loc = upload(slots);
  launch_kv_gather_model1({pool, 1, pages, page_entries, page_bytes}, 0, loc.as<int32_t>(), static_cast<int64_t>(slots.size()),
                          out.as<uint16_t>(), stream_);
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
}

void GpuForward::compress(int64_t layer, const std::string& p, int64_t dims, const Buf& xf, int64_t T, int64_t first_pos,
                          uint8_t* pool, int64_t pool_slots, int64_t first_slot, int64_t ring_slot, Buf& ring, Buf& ring_out) const {
  const int64_t ratio = c_.compress_ratios[layer];
  const int64_t width = reference::compressor_series(static_cast<int>(ratio)) * dims;
  Buf kv = device_array<float>(T * width), score = device_array<float>(T * width);
  gemm(xf.as<void>(), Dtype::f32, c_.dim, f32(p + "wkv.weight"), c_.dim, kv.as<void>(), Dtype::f32, width, T, c_.dim, width);
  gemm(xf.as<void>(), Dtype::f32, c_.dim, f32(p + "wgate.weight"), c_.dim, score.as<void>(), Dtype::f32, width, T, c_.dim, width);
  std::vector<int32_t> out_loc(static_cast<size_t>(T), 0);  // slot 0: the dummy of a token that completes no entry
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = first_pos + t;
    if ((pos + 1) % ratio == 0) out_loc[static_cast<size_t>(t)] = static_cast<int32_t>(first_slot + (pos + 1) / ratio - 1);
  }
  const Buf start = upload(std::vector<int32_t>{static_cast<int32_t>(first_pos)});
  const Buf extend = upload(std::vector<int32_t>{static_cast<int32_t>(T)});
  const Buf ring_index = upload(std::vector<int32_t>{static_cast<int32_t>(ring_slot)});
  const Buf loc = upload(out_loc);
  // The kernel writes only the rows of the step's last tokens into ring_out: the rest carried over.
  DSV4H_HIP_CHECK(hipMemcpyAsync(ring_out.as<void>(), ring.as<void>(), ring.bytes(), hipMemcpyDeviceToDevice, stream_));
  CompressorArgs a;
  a.kv = kv.as<float>();
  a.score = score.as<float>();
  a.ape = f32(p + "ape");
  a.norm_weight = f32(p + "norm.weight");
  a.ring = ring.as<float>();
  a.start = start.as<int32_t>();
  a.extend_len = extend.as<int32_t>();
  a.ring_index = ring_index.as<int32_t>();
  a.out_loc = loc.as<int32_t>();
  a.pool = pool;
  a.ring_out = ring_out.as<float>();
  a.ratio = ratio;
  a.dims = dims;
  a.batch = 1;
  a.tokens = T;
  a.pool_slots = pool_slots;
  launch_compressor(a, stream_);
  // The state stays in `ring` (a batch's graph reads it there: its pointers are fixed at capture).
  DSV4H_HIP_CHECK(hipMemcpyAsync(ring.as<void>(), ring_out.as<void>(), ring.bytes(), hipMemcpyDeviceToDevice, stream_));
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));  // the step's inputs are freed on return
}

}  // namespace dsv4h::model::gpu
