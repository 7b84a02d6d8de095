// Pack-and-store of one layer into the pool (spec 4.1, 4.2, 5.3): each row's bf16 latent becomes a
// MODEL1 entry (448 fp8 in 7 tiles of 64 with ue8m0 scales, 64 bf16 rope), each indexer key a
// 132-B entry (128 fp8, fp32 scale), scattered to the row's slot. Bit-exact with the CPU pack.
//
// Mutants: DSV4H_MUTANT_POOL_CACHED_LOC (the SWA translation cached in the pool when layer 0
// stores and reused by every later store, review finding 5), DSV4H_MUTANT_POOL_SCALE_ROUND_DOWN
// (kv_pool_fp8.h), DSV4H_MUTANT_NOOP (nothing written).
#include <string>

#include "kv_pool.h"
#include "kv_pool_fp8.h"
#include "kv_pool_launch.h"

namespace dsv4h {
namespace {

constexpr int kThreads = 256;
constexpr int kModel1ThreadsPerToken = 64;  // 8 values (16 B of bf16) each: 56 nope threads, 8 rope
constexpr int kModel1TokensPerBlock = kThreads / kModel1ThreadsPerToken;
constexpr int kIndexerThreadsPerEntry = 16;  // 8 values each
constexpr int kIndexerEntriesPerBlock = kThreads / kIndexerThreadsPerEntry;

// One pool layer a store writes into, and the rows and locations it writes.
struct StorePart {
  uint8_t* layer_base;
  int64_t tokens_per_page, page_bytes, slots;
  const int32_t* locs;
  const uint16_t* rows;  // [tokens, 512] latents or [tokens, 128] keys
};

// A layer's whole store in one launch: blocks [0, swa_blocks) store the latents into swa, the next
// compressed_blocks the compressor's entries into c4 or c128, the last indexer_blocks the keys.
// The branch is uniform per block, so the shared-memory exchange inside each part is safe.
struct LayerStore {
  StorePart swa, compressed, indexer;
  int64_t tokens, swa_blocks, compressed_blocks, indexer_blocks;
};

// A MODEL1 token is 64 threads: each loads 16 B, the 8 threads of a 64-dim tile agree on its amax
// through shared memory, and each writes its 8 fp8 codes as one 8-byte store; the first thread
// writes the 8 scale bytes (7 exponents and the zero pad) in one store. Rows whose location is 0
// or -1 (and slots outside the pool, which the harness rejects before launching) store nothing.
__device__ __forceinline__ void store_model1(const StorePart& a, int64_t tokens, int64_t block, float* part_amax,
                                             uint8_t (*exponents)[8]) {
  const int local = threadIdx.x / kModel1ThreadsPerToken, t = threadIdx.x % kModel1ThreadsPerToken;
  const int64_t row = block * kModel1TokensPerBlock + local;
  const int32_t slot = row < tokens ? a.locs[row] : 0;
  const bool active = slot > 0 && slot < a.slots;
  uint4 in = make_uint4(0, 0, 0, 0);
  if (active) in = reinterpret_cast<const uint4*>(a.rows + row * 512)[t];
  const uint16_t* v = reinterpret_cast<const uint16_t*>(&in);
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(kv_fp8::bf16_to_float(v[i])));
  part_amax[threadIdx.x] = amax;
  __syncthreads();
  uint8_t* page = a.layer_base + (slot / a.tokens_per_page) * a.page_bytes;
  const int64_t entry = slot % a.tokens_per_page;
  if (active && t < 56) {
    const int first = threadIdx.x & ~7;
    float tile_amax = part_amax[first];
#pragma unroll
    for (int i = 1; i < 8; ++i) tile_amax = fmaxf(tile_amax, part_amax[first + i]);
    const int e = kv_fp8::scale_exponent(tile_amax, -13);
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      lo |= static_cast<uint32_t>(kv_fp8::fp8_e4m3_rn(ldexpf(kv_fp8::bf16_to_float(v[i]), -e))) << (8 * i);
      hi |= static_cast<uint32_t>(kv_fp8::fp8_e4m3_rn(ldexpf(kv_fp8::bf16_to_float(v[4 + i]), -e))) << (8 * i);
    }
    *reinterpret_cast<uint2*>(page + entry * 576 + t * 8) = make_uint2(lo, hi);
    if (t % 8 == 0) exponents[local][t / 8] = static_cast<uint8_t>(e + 127);
  } else if (active) {
    *reinterpret_cast<uint4*>(page + entry * 576 + 448 + (t - 56) * 16) = in;  // rope, as it is
  }
  __syncthreads();
  if (active && t == 0) {
    const uint8_t* x = exponents[local];
    const uint32_t lo = x[0] | (x[1] << 8) | (x[2] << 16) | (static_cast<uint32_t>(x[3]) << 24);
    const uint32_t hi = x[4] | (x[5] << 8) | (x[6] << 16);
    *reinterpret_cast<uint2*>(page + a.tokens_per_page * 576 + entry * 8) = make_uint2(lo, hi);
  }
}

// An indexer entry is 16 threads of 8 values; the 16 partial maxima meet in shared memory.
__device__ __forceinline__ void store_indexer(const StorePart& a, int64_t tokens, int64_t block, float* part_amax) {
  const int local = threadIdx.x / kIndexerThreadsPerEntry, t = threadIdx.x % kIndexerThreadsPerEntry;
  const int64_t row = block * kIndexerEntriesPerBlock + local;
  const int32_t slot = row < tokens ? a.locs[row] : 0;
  const bool active = slot > 0 && slot < a.slots;
  uint4 in = make_uint4(0, 0, 0, 0);
  if (active) in = reinterpret_cast<const uint4*>(a.rows + row * 128)[t];
  const uint16_t* v = reinterpret_cast<const uint16_t*>(&in);
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(kv_fp8::bf16_to_float(v[i])));
  part_amax[threadIdx.x] = amax;
  __syncthreads();
  if (!active) return;
  const int first = local * kIndexerThreadsPerEntry;
  float entry_amax = part_amax[first];
#pragma unroll
  for (int i = 1; i < kIndexerThreadsPerEntry; ++i) entry_amax = fmaxf(entry_amax, part_amax[first + i]);
  const int e = kv_fp8::scale_exponent(entry_amax, -22);
  uint8_t* page = a.layer_base + (slot / a.tokens_per_page) * a.page_bytes;
  const int64_t entry = slot % a.tokens_per_page;
  uint32_t lo = 0, hi = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    lo |= static_cast<uint32_t>(kv_fp8::fp8_e4m3_rn(ldexpf(kv_fp8::bf16_to_float(v[i]), -e))) << (8 * i);
    hi |= static_cast<uint32_t>(kv_fp8::fp8_e4m3_rn(ldexpf(kv_fp8::bf16_to_float(v[4 + i]), -e))) << (8 * i);
  }
  *reinterpret_cast<uint2*>(page + entry * 128 + t * 8) = make_uint2(lo, hi);
  if (t == 0) *reinterpret_cast<float*>(page + a.tokens_per_page * 128 + entry * 4) = ldexpf(1.f, e);
}

__global__ void __launch_bounds__(kThreads) kv_store_layer(LayerStore a) {
#if defined(DSV4H_MUTANT_NOOP)
  if (a.tokens >= 0) return;
#endif
  __shared__ float part_amax[kThreads];
  __shared__ uint8_t exponents[kModel1TokensPerBlock][8];
  int64_t block = blockIdx.x;
  if (block < a.swa_blocks) return store_model1(a.swa, a.tokens, block, part_amax, exponents);
  block -= a.swa_blocks;
  if (block < a.compressed_blocks) return store_model1(a.compressed, a.tokens, block, part_amax, exponents);
  store_indexer(a.indexer, a.tokens, block - a.compressed_blocks, part_amax);
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
  kv_require(pool.slots() <= INT32_MAX, n + " pool: more than 2^31 slots");
}

StorePart part(const KvPoolBuffer& pool, int layer, const int32_t* locs, const uint16_t* rows) {
  return StorePart{pool.base + layer * pool.layer_bytes(), pool.tokens_per_page, pool.page_bytes, pool.slots(), locs, rows};
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

}  // namespace

// Grid: one block of 256 threads per 4 tokens of each MODEL1 part and per 16 indexer entries, every
// thread moving 16 B of input, all parts of the layer in one launch (a decode step's layer is one
// small launch, not three); a prefill has enough blocks to fill the device many times over, with
// no grid-stride loop, which keeps the shared-memory exchange per token simple.
void launch_kv_store_layer(const KvPoolSet& pools, const KvStepLocations& step, const KvLayerStore& layer,
                           hipStream_t stream) {
  kv_require(step.tokens >= 0, "tokens must be >= 0, got " + std::to_string(step.tokens));
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
  a.tokens = step.tokens;
  a.swa = part(pools.swa, layer.swa_layer, swa_loc, layer.kv);
  a.swa_blocks = (step.tokens + kModel1TokensPerBlock - 1) / kModel1TokensPerBlock;
  if (layer.ratio == 4) {
    a.compressed = part(pools.c4, layer.compressed_layer, step.c4_out_loc, layer.compressed_kv);
    a.compressed_blocks = a.swa_blocks;
    a.indexer = part(pools.indexer, layer.indexer_layer, step.c4_out_loc, layer.index_k);
    a.indexer_blocks = (step.tokens + kIndexerEntriesPerBlock - 1) / kIndexerEntriesPerBlock;
  } else if (layer.ratio == 128) {
    a.compressed = part(pools.c128, layer.compressed_layer, step.c128_out_loc, layer.compressed_kv);
    a.compressed_blocks = a.swa_blocks;
  }
  const int64_t blocks = a.swa_blocks + a.compressed_blocks + a.indexer_blocks;
  kv_require(blocks <= INT32_MAX, "tokens " + std::to_string(step.tokens) + " need more than 2^31 blocks");
  kv_store_layer<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  DSV4H_LAUNCH_CHECK("kv_store_layer");
}

}  // namespace dsv4h
