// Pack-and-store of one layer into the pool (spec 4.1, 4.2, 5.3): each row's bf16 latent becomes a
// MODEL1 entry (448 fp8 in 7 tiles of 64 with ue8m0 scales, 64 bf16 rope), each indexer key a
// 132-B entry (128 fp8, fp32 scale), scattered to the row's slot. Bit-exact with the CPU pack.
//
// Mutants: DSV4H_MUTANT_POOL_CACHED_LOC (the SWA translation cached in the pool when layer 0
// stores and reused by every later store, review finding 5), DSV4H_MUTANT_POOL_SCALE_ROUND_DOWN
// (kv_pool_fp8.h), DSV4H_MUTANT_NOOP (nothing written).
#include <cstddef>
#include <string>

#include "kv_pool.h"
#include "kv_pool_fp8.h"
#include "kv_pool_launch.h"

namespace dsv4h {
namespace {

constexpr int kThreads = 256;
constexpr int kModel1ThreadsPerToken = 64;  // 8 values (16 B of bf16) each: 56 nope threads, 8 rope
constexpr int kModel1Groups = kThreads / kModel1ThreadsPerToken;
constexpr int kIndexerThreadsPerEntry = 16;  // 8 values each
constexpr int kIndexerGroups = kThreads / kIndexerThreadsPerEntry;
// One pool layer a store writes into, and the rows and locations it writes (the wrappers check
// that every size fits 32 bits: slots and tokens below 2^31).
struct StorePart {
  const int32_t* locs;
  const uint16_t* rows;  // [tokens, 512] latents or [tokens, 128] keys
  uint8_t* layer_base;
  Divider by_page;  // tokens_per_page
  uint32_t tokens_per_page, page_bytes, slots;
};

// A layer's whole store in one launch: blocks [0, swa_blocks) store the latents into swa, the next
// compressed_blocks the compressor's entries into c4 or c128, the last indexer_blocks the keys.
// The counts and the SWA part (every layer's, and a decode step's whole chain) come first: a
// ratio-0 store reads only the first 64 bytes of its parameters.
struct LayerStore {
  uint32_t tokens, swa_blocks, compressed_blocks, indexer_blocks;
  StorePart swa, compressed, indexer;
};
static_assert(offsetof(LayerStore, swa) + sizeof(StorePart) <= 64, "the counts and the SWA part fill the first 64 bytes");

// A group's rows and their 16-byte slices: every location and every row load of the block issued
// at once (the rows do not wait for their locations), so that a block has kSteps tokens a group
// in flight. Rows past the end get location 0 (nothing stored) and no load.
template <int kSteps, int kGroups, int kThreadsPer, int kRowElems>
__device__ __forceinline__ void load_rows(const StorePart& a, int64_t tokens, int64_t block, int64_t (&row)[kSteps],
                                          int32_t (&slot)[kSteps], uint4 (&in)[kSteps]) {
  const int group = threadIdx.x / kThreadsPer, t = threadIdx.x % kThreadsPer;
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    row[i] = (block * kSteps + i) * kGroups + group;
    slot[i] = row[i] < tokens ? a.locs[row[i]] : 0;
    in[i] = row[i] < tokens ? load_read_only(reinterpret_cast<const uint4*>(a.rows + row[i] * kRowElems) + t)
                            : make_uint4(0, 0, 0, 0);
  }
}

// The largest |value| of eight bf16 values (0 where all are NaN), as a tree of three levels
// rather than a chain of eight: fmaxf ignores a NaN operand, so any order gives the same result.
__device__ __forceinline__ float amax8(uint4 in) {
  const uint32_t w[4] = {in.x, in.y, in.z, in.w};
  float pair_max[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    pair_max[i] = fmaxf(fabsf(__uint_as_float(w[i] << 16)), fabsf(__uint_as_float(w[i] & 0xffff0000u)));
  return fmaxf(fmaxf(fmaxf(pair_max[0], pair_max[1]), fmaxf(pair_max[2], pair_max[3])), 0.f);
}

// A MODEL1 token is 64 threads: each holds 16 B, the 8 threads of a 64-dim tile agree on its amax
// through lane exchanges, and each writes its 8 fp8 codes as one 8-byte store. The scale bytes
// (7 exponents and the zero pad) are stored by the first thread of each tile and the first rope
// thread, a byte each: no shared memory and no barrier on a decode store's chain (on the H200, 1
// token: 2.01 -> 1.95 us, 256 tokens: 2.45 -> 2.35 against shared memory, two rounds in one
// device call agreeing), and no lane exchanges gathering them into words (with amax8's tree,
// against two words gathered by three exchanges and a chain of eight maxima: 1M tokens 442 -> 428
// us at page runs and 518 -> 512 shuffled, decode sizes 0.05-0.12 us faster where the unchanged
// floor kernels moved 0.02-0.08; reports/gpu/2026-12-03-b86392d-h200-ab-store-scale-bytes.json).
// The exchange as one __reduce_max_sync a group was 0.16-0.21 us slower at every decode size: with
// a mask per group, nvcc reduces the warp's groups one after the other
// (reports/gpu/2026-12-04-1bae12c-h200-ab-store-redux.json). Of the 64-token store's 0.26 us over
// its floor, the conversion is about 0.15 and the exchange 0.08; without either the store is still
// 1.48x the empty kernel (reports/gpu/2026-12-04-1bae12c-h200-store-chain-parts.json).
// Rows whose location is 0 or -1 (and slots outside the pool, which the harness rejects before
// launching) store nothing.
template <int kSteps>
__device__ __forceinline__ void store_model1(const StorePart& a, int64_t tokens, int64_t block) {
  const int t = threadIdx.x % kModel1ThreadsPerToken;
  int64_t row[kSteps];
  int32_t slot[kSteps];
  uint4 in[kSteps];
  load_rows<kSteps, kModel1Groups, kModel1ThreadsPerToken, 512>(a, tokens, block, row, slot, in);
  int exponent[kSteps];  // every lane of the warp takes part in the exchange, before any branch
#pragma unroll
  for (int i = 0; i < kSteps; ++i) exponent[i] = kv_fp8::scale_exponent(max_over_lanes(amax8(in[i]), 8), -13);
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    if (!(slot[i] > 0 && static_cast<uint32_t>(slot[i]) < a.slots)) continue;
    const kv_fp8::SlotPlace place = kv_fp8::place_of(slot[i], a.by_page, a.tokens_per_page);
    uint8_t* page = a.layer_base + size_t{place.page} * a.page_bytes;
    uint8_t* entry = page + place.entry * 576;
    if (t < 56) {
      *reinterpret_cast<uint2*>(entry + t * 8) = kv_fp8::bf16x8_to_fp8x8(in[i], exponent[i]);
    } else {
      *reinterpret_cast<uint4*>(entry + 448 + (t - 56) * 16) = in[i];  // rope, as it is
    }
    if (t % 8 == 0)  // tile t / 8's exponent, or (t = 56) the pad
      page[size_t{a.tokens_per_page} * 576 + place.entry * 8 + t / 8] = t < 56 ? static_cast<uint8_t>(exponent[i] + 127) : 0;
  }
}

// An indexer entry is 16 threads of 8 values; the 16 partial maxima meet through lane exchanges.
template <int kSteps>
__device__ __forceinline__ void store_indexer(const StorePart& a, int64_t tokens, int64_t block) {
  const int t = threadIdx.x % kIndexerThreadsPerEntry;
  int64_t row[kSteps];
  int32_t slot[kSteps];
  uint4 in[kSteps];
  load_rows<kSteps, kIndexerGroups, kIndexerThreadsPerEntry, 128>(a, tokens, block, row, slot, in);
  float entry_amax[kSteps];  // every lane of the warp takes part in the exchange, before any branch
#pragma unroll
  for (int i = 0; i < kSteps; ++i) entry_amax[i] = max_over_lanes(amax8(in[i]), kIndexerThreadsPerEntry);
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    if (!(slot[i] > 0 && static_cast<uint32_t>(slot[i]) < a.slots)) continue;
    const int e = kv_fp8::scale_exponent(entry_amax[i], -22);
    const kv_fp8::SlotPlace place = kv_fp8::place_of(slot[i], a.by_page, a.tokens_per_page);
    uint8_t* page = a.layer_base + size_t{place.page} * a.page_bytes;
    const int64_t entry = place.entry;
    *reinterpret_cast<uint2*>(page + entry * 128 + t * 8) = kv_fp8::bf16x8_to_fp8x8(in[i], e);
    if (t == 0) *reinterpret_cast<float*>(page + size_t{a.tokens_per_page} * 128 + entry * 4) = ldexpf(1.f, e);
  }
}

template <int kSteps>
__global__ void __launch_bounds__(kThreads) kv_store_layer(LayerStore a) {
#if defined(DSV4H_MUTANT_NOOP)
  if (a.tokens <= INT32_MAX) return;  // always (the wrapper checks), unknown to the compiler
#endif
  int64_t block = blockIdx.x;
  if (block < a.swa_blocks) return store_model1<kSteps>(a.swa, a.tokens, block);
  block -= a.swa_blocks;
  if (block < a.compressed_blocks) return store_model1<kSteps>(a.compressed, a.tokens, block);
  store_indexer<kSteps>(a.indexer, a.tokens, block - a.compressed_blocks);
}

void check_pool(const KvPoolBuffer& pool, int layer, int64_t entry_bytes, const char* name) {
  const std::string n = name;
  kv_require(pool.base != nullptr, n + " pool: null buffer");
  kv_require(layer >= 0 && layer < pool.layers, n + " pool: layer " + std::to_string(layer) + " outside [0, " +
                                                     std::to_string(pool.layers) + ")");
  kv_require(pool.tokens_per_page > 0 && pool.page_bytes >= pool.tokens_per_page * entry_bytes,
             n + " pool: page_bytes " + std::to_string(pool.page_bytes) + " too small for " +
                 std::to_string(pool.tokens_per_page) + " entries");
  const int64_t align = entry_bytes == 132 ? 8 : 16;  // the widest store into a page
  kv_require(pool.page_bytes % align == 0, n + " pool: page_bytes must be a multiple of " + std::to_string(align));
  kv_require(pool.slots() <= INT32_MAX && pool.tokens_per_page <= INT32_MAX, n + " pool: more than 2^31 slots or tokens a page");
  kv_require(pool.page_bytes <= UINT32_MAX, n + " pool: page_bytes " + std::to_string(pool.page_bytes) + " above 2^32 - 1");
}

StorePart part(const KvPoolBuffer& pool, int layer, const int32_t* locs, const uint16_t* rows) {
  return StorePart{locs, rows, pool.base + layer * pool.layer_bytes(), divider_for(static_cast<uint32_t>(pool.tokens_per_page)),
                   static_cast<uint32_t>(pool.tokens_per_page), static_cast<uint32_t>(pool.page_bytes),
                   static_cast<uint32_t>(pool.slots())};
}

// Every check before the first launch, so that a bad argument leaves the pool untouched.
void check_layer(const KvPoolSet& pools, const KvStepLocations& step, const KvLayerStore& layer) {
  const std::string where = "layer " + std::to_string(layer.layer_id) + ": ";
  kv_require(layer.ratio == 0 || layer.ratio == 4 || layer.ratio == 128,
             where + "ratio must be 0, 4 or 128, got " + std::to_string(layer.ratio));
  kv_require(layer.kv && step.swa_out_loc, where + "null latent rows or swa_out_loc");
  check_pool(pools.swa, layer.swa_layer, 584, "swa");
  if (layer.ratio == 4) {
    kv_require(layer.compressed_kv && layer.index_k && step.c4_out_loc, where + "null c4 rows, keys or c4_out_loc");
    check_pool(pools.c4, layer.compressed_layer, 584, "c4");
    check_pool(pools.indexer, layer.indexer_layer, 132, "indexer");
  } else if (layer.ratio == 128) {
    kv_require(layer.compressed_kv && step.c128_out_loc, where + "null c128 rows or c128_out_loc");
    check_pool(pools.c128, layer.compressed_layer, 584, "c128");
  }
}

// Grid: one block of 256 threads per 4 x kSteps tokens of each MODEL1 part and per 16 x kSteps
// indexer entries, every thread moving kSteps x 16 B of input, all parts of the layer in one launch (a
// decode step's layer is one small launch, not three); a prefill has enough blocks to fill the
// device many times over, so there is no grid-stride loop. At decode sizes, on the H200, none of
// these was faster (ci/gpu-ab, 6 rounds, every change unclear): blocks of 64 threads, one token
// each (+0.03 to +0.09 us; reports/gpu/2026-12-03-9f34ada-h200-ab-store-block64.json); a ratio-0
// kernel holding the SWA part alone, with the software fp8 rounding out of line
// (reports/gpu/2026-12-03-f4bc5d0-h200-ab-store-small.json; -9f34ada-h200-ab-store-swa-only.json
// together with the next change); the hardware fp8 path chosen from the input's bits (no inf or
// NaN) rather than from the scaled values (-9f34ada-h200-ab-store-finite.json). Of seven layouts
// of the floor's bytes (8 to 64 threads a token, blocks of 64 to 256), this one moved 8 and 64
// tokens fastest, and none brought 256 tokens within 1.5x of the empty kernel
// (reports/gpu/2026-12-04-1bae12c-h200-store-floor-layouts.json).
template <int kSteps>
void launch_store(LayerStore a, const KvStepLocations& step, int ratio, hipStream_t stream) {
  const int64_t model1_per_block = kModel1Groups * kSteps, indexer_per_block = kIndexerGroups * kSteps;
  const int64_t swa_blocks = (step.tokens + model1_per_block - 1) / model1_per_block;
  const int64_t compressed_blocks = ratio == 4 || ratio == 128 ? swa_blocks : 0;
  const int64_t indexer_blocks = ratio == 4 ? (step.tokens + indexer_per_block - 1) / indexer_per_block : 0;
  const int64_t blocks = swa_blocks + compressed_blocks + indexer_blocks;
  kv_require(blocks <= INT32_MAX, "tokens " + std::to_string(step.tokens) + " need more than 2^31 blocks");
  a.swa_blocks = static_cast<uint32_t>(swa_blocks);
  a.compressed_blocks = static_cast<uint32_t>(compressed_blocks);
  a.indexer_blocks = static_cast<uint32_t>(indexer_blocks);
  kv_store_layer<kSteps><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  DSV4H_LAUNCH_CHECK("kv_store_layer");
}

}  // namespace

void launch_kv_store_layer(const KvPoolSet& pools, const KvStepLocations& step, const KvLayerStore& layer,
                           hipStream_t stream) {
  kv_require(step.tokens >= 0 && step.tokens <= INT32_MAX, "tokens must be in [0, 2^31 - 1], got " + std::to_string(step.tokens));
  check_layer(pools, step, layer);
  if (step.tokens == 0) return;
#if defined(DSV4H_MUTANT_POOL_CACHED_LOC)
  // SGLang's set_swa_key_buffer_radix_fused: translate when layer 0 stores, reuse it otherwise.
  kv_require(pools.translation_cache != nullptr, "pool_cached_loc mutant: null translation_cache");
  if (layer.layer_id == 0) launch_kv_translate_swa(step, pools.translation_cache, stream);
  const int32_t* swa_loc = pools.translation_cache;
#else
  const int32_t* swa_loc = step.swa_out_loc;
#endif
  LayerStore a{};
  a.tokens = static_cast<uint32_t>(step.tokens);
  a.swa = part(pools.swa, layer.swa_layer, swa_loc, layer.kv);
  if (layer.ratio == 4) {
    a.compressed = part(pools.c4, layer.compressed_layer, step.c4_out_loc, layer.compressed_kv);
    a.indexer = part(pools.indexer, layer.indexer_layer, step.c4_out_loc, layer.index_k);
  } else if (layer.ratio == 128) {
    a.compressed = part(pools.c128, layer.compressed_layer, step.c128_out_loc, layer.compressed_kv);
  }
  if (step.tokens <= kStoreOneStepTokens)
    launch_store<1>(a, step, layer.ratio, stream);
  else
    launch_store<kStoreBulkSteps>(a, step, layer.ratio, stream);
}

}  // namespace dsv4h
