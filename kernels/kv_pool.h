// Launch wrappers of the DeepSeek-V4 KV memory pool kernels (spec 4.1, 4.2, 5.2, 5.4): the once-
// per-step location translation, the per-layer pack-and-store (MODEL1 584-B latents and 132-B
// indexer keys, scattered by slot) and the gather-and-unpack that reads entries back.
//
// Locations are int32 slots; slot s of a pool is entry s % P of page s / P. A store skips rows whose
// location is 0 (the sink) or -1: the sink never holds live data, and writing nothing there keeps
// the pool deterministic when many padding rows target it. Every wrapper checks its arguments
// (std::invalid_argument naming the field), enqueues on `stream` and never synchronises.
#pragma once

#include <cstdint>

#include "portability.h"

namespace dsv4h {

// One pool: `layers` consecutive buffers of `layer_bytes`, each `pages` pages of `tokens_per_page`
// entries in the pool's page format (MODEL1: data then scales, padded to 576; indexer: values then
// fp32 scales).
struct KvPoolBuffer {
  uint8_t* base = nullptr;
  int64_t layers = 0;
  int64_t pages = 0;
  int64_t tokens_per_page = 0;
  int64_t page_bytes = 0;
  int64_t layer_bytes() const { return pages * page_bytes; }
  int64_t slots() const { return pages * tokens_per_page; }
};

struct KvPoolSet {
  KvPoolBuffer swa, c4, c128, indexer;
  // SGLang's `cached_loc` ([tokens] SWA slots left by an earlier step). The correct pool keeps no
  // state between calls and never touches it; only the pool_cached_loc mutant reads and writes it.
  int32_t* translation_cache = nullptr;
};

// The step's locations: inputs, and the metadata the translation writes once for all layers.
struct KvStepLocations {
  const int32_t* full_to_swa = nullptr;  // [full_slots]: 0 = no SWA slot (dummy)
  int64_t full_slots = 0;
  const int32_t* out_cache_loc = nullptr;  // [tokens] full slots; -1 = not stored
  const int32_t* seq_lens = nullptr;       // [tokens] sequence length after the token
  int64_t tokens = 0;
  int32_t* swa_out_loc = nullptr;   // [tokens] full_to_swa[out_cache_loc]; -1 stays -1
  int32_t* c4_out_loc = nullptr;    // [tokens] out_cache_loc / 4 where seq_len % 4 == 0, else 0
  int32_t* c128_out_loc = nullptr;  // [tokens] likewise for 128
};

// One layer's store: its id (its ratio and buffers follow from the model), and its rows, bf16 bits.
struct KvLayerStore {
  int layer_id = 0;
  int ratio = 0;             // 0, 4 or 128
  int swa_layer = 0;         // the layer's buffer in the swa pool
  int compressed_layer = 0;  // in c4 (ratio 4) or c128 (ratio 128)
  int indexer_layer = 0;     // in the indexer pool (ratio 4)
  const uint16_t* kv = nullptr;             // [tokens, 512] the SWA latent
  const uint16_t* compressed_kv = nullptr;  // [tokens, 512] the compressor's entry (ratio 4, 128)
  const uint16_t* index_k = nullptr;        // [tokens, 128] the indexer key (ratio 4)
};

// Writes the step's three location arrays (one launch).
void launch_kv_translate(const KvStepLocations& step, hipStream_t stream);

// Packs and stores one layer's rows: the latent into swa at swa_out_loc; for ratio 4 the compressed
// latent into c4 and the key into the indexer pool at c4_out_loc; for 128 into c128 at c128_out_loc.
void launch_kv_store_layer(const KvPoolSet& pools, const KvStepLocations& step, const KvLayerStore& layer,
                           hipStream_t stream);

// Reads entries back: `slots` [n] of layer `layer` of a MODEL1 pool into bf16 latents [n, 512], or
// of the indexer pool into fp32 keys [n, 128] (fp8 * scale). A slot outside the pool (-1 included)
// reads nothing and gives a row of zeros. The pool and `out` must be 16-byte aligned.
void launch_kv_gather_model1(const KvPoolBuffer& pool, int layer, const int32_t* slots, int64_t n, uint16_t* out,
                             hipStream_t stream);
void launch_kv_gather_indexer(const KvPoolBuffer& pool, int layer, const int32_t* slots, int64_t n, float* out,
                              hipStream_t stream);

// Bytes a store or a gather moves per MODEL1 entry: the 1024-B bf16 latent, the 584-B entry, its slot.
constexpr double kv_model1_bytes_per_token() { return 1024 + 584 + 4; }

}  // namespace dsv4h
