#include "../../kernels/kv_pool.h"
#include "../../reference/kv_pool.h"
#include "../components/memory_pool.h"
#include "launchers.h"

namespace dsv4h {
namespace {

using reference::PoolKind;

KvPoolBuffer pool_buffer(DeviceTensorMap& outputs, const char* name, PoolKind kind, const MemoryPoolSizes& s) {
  KvPoolBuffer b;
  b.base = outputs.data<uint8_t>(name);
  b.layers = reference::pool_layers(kind, static_cast<int>(s.layers));
  b.pages = kind == PoolKind::swa ? s.swa_pages : s.full_pages;
  b.tokens_per_page = reference::pool_tokens_per_page(kind, s.swa_page);
  b.page_bytes = reference::pool_page_bytes(kind, s.swa_page);
  return b;
}

}  // namespace

KvPoolSet memory_pool_device_pools(const Case& c, DeviceTensorMap& outputs, int32_t* translation_cache) {
  const MemoryPoolSizes s = memory_pool_sizes(c);
  KvPoolSet pools;
  pools.swa = pool_buffer(outputs, "swa_pool", PoolKind::swa, s);
  pools.c4 = pool_buffer(outputs, "c4_pool", PoolKind::c4, s);
  pools.c128 = pool_buffer(outputs, "c128_pool", PoolKind::c128, s);
  pools.indexer = pool_buffer(outputs, "indexer_pool", PoolKind::indexer, s);
  pools.translation_cache = translation_cache;
  return pools;
}

KvLayerStore memory_pool_layer(const Case& c, const DeviceTensorMap& inputs, int layer) {
  const MemoryPoolSizes s = memory_pool_sizes(c);
  KvLayerStore l;
  l.layer_id = layer;
  l.ratio = reference::layer_compress_ratio(layer);
  l.swa_layer = reference::pool_local_layer(PoolKind::swa, layer);
  l.compressed_layer = l.ratio == 0 ? 0 : reference::pool_local_layer(l.ratio == 4 ? PoolKind::c4 : PoolKind::c128, layer);
  l.indexer_layer = l.ratio == 4 ? reference::pool_local_layer(PoolKind::indexer, layer) : 0;
  l.kv = inputs.data<const uint16_t>("kv") + layer * s.tokens * 512;
  l.compressed_kv = inputs.data<const uint16_t>("compressed_kv") + layer * s.tokens * 512;
  l.index_k = inputs.data<const uint16_t>("index_k") + layer * s.tokens * 128;
  return l;
}

// The step as an engine runs it: one translation into the step's metadata, then every layer of
// the stage stores in the case's order, all reading that metadata.
void launch_memory_pool_case(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream) {
  const MemoryPoolSizes s = memory_pool_sizes(c);
  const hipStream_t st = static_cast<hipStream_t>(stream);
  KvStepLocations step;
  step.full_to_swa = inputs.data<const int32_t>("full_to_swa");
  step.full_slots = s.full_slots();
  step.out_cache_loc = inputs.data<const int32_t>("out_cache_loc");
  step.seq_lens = inputs.data<const int32_t>("seq_lens");
  step.tokens = s.tokens;
  step.swa_out_loc = outputs.data<int32_t>("swa_out_loc");
  step.c4_out_loc = outputs.data<int32_t>("c4_out_loc");
  step.c128_out_loc = outputs.data<int32_t>("c128_out_loc");
  const KvPoolSet pools = memory_pool_device_pools(c, outputs, inputs.data<int32_t>("stale_swa_loc"));
  launch_kv_translate(step, st);
  for (int layer : memory_pool_store_order(c)) launch_kv_store_layer(pools, step, memory_pool_layer(c, inputs, layer), st);
}

}  // namespace dsv4h
