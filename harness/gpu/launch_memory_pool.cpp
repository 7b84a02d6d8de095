#include <stdexcept>
#include <string>

#include "../../kernels/kv_pool.h"
#include "../components/memory_pool.h"
#include "launchers.h"

namespace dsv4h {
namespace {

// The pools' device layout as this binding reads it in the spec (4.1, 5.1, 5.2), stated here and
// not taken from the reference's layout functions: a layout bug on either side then shows as a
// mismatch (or as pool tensors of another size, refused below) instead of on both sides alike.
constexpr int64_t kModel1EntryBytes = 584;     // 448 fp8 + 64 bf16 rope (576 B), then 7 scales + 1 pad
constexpr int64_t kModel1SectionBytes = 576;   // a MODEL1 page is padded to a multiple of this
constexpr int64_t kIndexerEntryBytes = 132;    // 128 fp8, then one fp32 scale
constexpr int64_t kFullPageTokens = 256;       // a full-cache page; c4 and c128 pages compress it

enum class Pool { swa, c4, c128, indexer };

// Layer L's compress ratio in the tiny model's pattern (spec 1.3): 0 for layer 0, then 4, 128, 4, ...
int compress_ratio(int layer) { return layer == 0 ? 0 : layer % 2 == 1 ? 4 : 128; }

// Every layer has a buffer in swa; ratio-4 layers (1, 3, ...) in c4 and indexer, ratio-128 layers
// (2, 4, ...) in c128, each pool's buffers in layer order.
int pool_buffers(Pool pool, int64_t layers) {
  switch (pool) {
    case Pool::swa: return static_cast<int>(layers);
    case Pool::c4: case Pool::indexer: return static_cast<int>(layers / 2);
    case Pool::c128: return static_cast<int>((layers - 1) / 2);
  }
  return 0;
}

KvPoolBuffer pool_buffer(DeviceTensorMap& outputs, const char* name, Pool pool, const MemoryPoolSizes& s) {
  KvPoolBuffer b;
  b.base = outputs.data<uint8_t>(name);
  b.layers = pool_buffers(pool, s.layers);
  b.pages = pool == Pool::swa ? s.swa_pages : s.full_pages;
  b.tokens_per_page = pool == Pool::swa ? s.swa_page : pool == Pool::c128 ? kFullPageTokens / 128 : kFullPageTokens / 4;
  if (pool == Pool::indexer) {
    b.page_bytes = b.tokens_per_page * kIndexerEntryBytes;
  } else {
    const int64_t sections = (b.tokens_per_page * kModel1EntryBytes + kModel1SectionBytes - 1) / kModel1SectionBytes;
    b.page_bytes = sections * kModel1SectionBytes;
  }
  const size_t allocated = outputs.at(name).buffer.bytes();
  if (allocated != static_cast<size_t>(b.layers * b.layer_bytes()))
    throw std::logic_error(std::string("memory_pool binding: ") + name + " holds " + std::to_string(allocated) +
                           " bytes, its layout " + std::to_string(b.layers * b.layer_bytes()) +
                           ": the descriptor and the binding disagree on the pool's layout");
  return b;
}

}  // namespace

KvPoolSet memory_pool_device_pools(const Case& c, DeviceTensorMap& outputs, int32_t* translation_cache) {
  const MemoryPoolSizes s = memory_pool_sizes(c);
  KvPoolSet pools;
  pools.swa = pool_buffer(outputs, "swa_pool", Pool::swa, s);
  pools.c4 = pool_buffer(outputs, "c4_pool", Pool::c4, s);
  pools.c128 = pool_buffer(outputs, "c128_pool", Pool::c128, s);
  pools.indexer = pool_buffer(outputs, "indexer_pool", Pool::indexer, s);
  pools.translation_cache = translation_cache;
  return pools;
}

KvLayerStore memory_pool_layer(const Case& c, const DeviceTensorMap& inputs, int layer) {
  const MemoryPoolSizes s = memory_pool_sizes(c);
  KvLayerStore l;
  l.layer_id = layer;
  l.ratio = compress_ratio(layer);
  l.swa_layer = layer;
  l.compressed_layer = l.ratio == 4 ? layer / 2 : l.ratio == 128 ? layer / 2 - 1 : 0;
  l.indexer_layer = l.ratio == 4 ? layer / 2 : 0;
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
