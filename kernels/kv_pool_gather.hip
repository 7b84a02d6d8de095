// Gather-and-unpack: pool entries at given slots back to values (spec 4.1, 4.2), as an attention
// or indexer kernel reads them: MODEL1 to bf16 latents (fp8 * 2^e is exact in bf16), indexer keys
// to fp32 (fp8 * scale). Exactly the CPU unpack.
#include <string>

#include "kv_pool.h"
#include "kv_pool_fp8.h"
#include "kv_pool_launch.h"

namespace dsv4h {
namespace {

constexpr int kThreads = 256;
constexpr int kModel1ThreadsPerToken = 64;
constexpr int kIndexerThreadsPerEntry = 16;
// Rows a thread group gathers per block. A gather's data load waits for its slot, so a group holds
// kSteps rows in flight: first every slot, then every data load, then the unpacks and stores.
constexpr int kSteps = 4;
constexpr int kTokensPerBlock = kThreads / kModel1ThreadsPerToken * kSteps;
constexpr int kEntriesPerBlock = kThreads / kIndexerThreadsPerEntry * kSteps;

struct Gather {
  const uint8_t* layer_base;
  int64_t tokens_per_page, page_bytes, pool_slots;
  Divider by_page;  // tokens_per_page
  const int32_t* slots;
  int64_t n;
  void* out;
};

// Rows of the block's steps for one group, and their slots (-1 past the end: no entry).
template <int kThreadsPer>
__device__ __forceinline__ void load_slots(const Gather& a, int64_t (&row)[kSteps], int32_t (&slot)[kSteps]) {
  constexpr int kGroups = kThreads / kThreadsPer;
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    row[i] = (int64_t{blockIdx.x} * kSteps + i) * kGroups + threadIdx.x / kThreadsPer;
    slot[i] = row[i] < a.n ? a.slots[row[i]] : -1;
  }
}

// 64 threads a token as in the store: 8 fp8 codes (8 B) in, 8 bf16 (16 B) out per thread; the 8
// rope threads copy 16 B each.
// On NVIDIA at most 32 registers a thread, so 8 blocks an SM (40 allowed 6): a bulk gather is
// bound by the loads in flight (hipcc takes the second bound as its own occupancy hint; AMD is
// compile-checked only). Measured on the H200 (ci/gpu-ab, 6 rounds, every one faster, 8 bytes
// spilled; reports/gpu/2026-12-03-892f9d4-h200-ab-pool-small-occ.json): 1M tokens 452 -> 438 us
// at page runs and 496 -> 473 us at shuffled slots, 65536 tokens 32.2 -> 31.4 and 34.9 -> 33.7 us.
// The entry's loads ask L2 for 64-byte fetches (an entry is nine 64-byte pieces, aligned as the
// page is; spec pages are multiples of 576 bytes): against the default, 1M tokens 437.8 -> 434.8
// us at page runs and 473.1 -> 466.2 us at shuffled slots, 65536 tokens 0.19 and 0.35 us faster
// (6 of 6 rounds; reports/gpu/2026-12-04-308953c-h200-ab-gather-l2-64.json); 128-byte fetches
// were 8 us faster at page runs but 0.7 slower shuffled, 256-byte 12 us slower shuffled
// (reports/gpu/2026-12-04-43153aa-h200-mtp-gather-diag.json).
__global__ void __launch_bounds__(kThreads, 8) kv_gather_model1(Gather a) {
#if defined(DSV4H_MUTANT_NOOP)
  if (a.n >= 0) return;
#endif
  const int t = threadIdx.x % kModel1ThreadsPerToken;
  int64_t row[kSteps];
  int32_t slot[kSteps];
  load_slots<kModel1ThreadsPerToken>(a, row, slot);
  uint4 data[kSteps];  // the rope, or the codes in .x and .y
  int exponent[kSteps];
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    data[i] = make_uint4(0, 0, 0, 0);
    exponent[i] = 0;
    if (slot[i] < 0 || slot[i] >= a.pool_slots) continue;  // no entry (-1) or bad input: zeros, nothing read
    const kv_fp8::SlotPlace place = kv_fp8::place_of(slot[i], a.by_page, static_cast<uint32_t>(a.tokens_per_page));
    const uint8_t* page = a.layer_base + place.page * a.page_bytes;
    const int64_t entry = place.entry;
    if (t >= 56) {
      data[i] = load_read_only_l2_64b(reinterpret_cast<const uint4*>(page + entry * 576 + 448) + (t - 56));
    } else {
      const uint2 codes = load_read_only_l2_64b(reinterpret_cast<const uint2*>(page + entry * 576) + t);
      data[i].x = codes.x, data[i].y = codes.y;
      exponent[i] = static_cast<int>(load_read_only_l2_64b(page + a.tokens_per_page * 576 + entry * 8 + t / 8)) - 127;
    }
  }
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    if (row[i] >= a.n) continue;
    uint4* out = reinterpret_cast<uint4*>(static_cast<uint16_t*>(a.out) + row[i] * 512) + t;
    const bool valid = slot[i] >= 0 && slot[i] < a.pool_slots;
    if (!valid || t >= 56) {
      store_evict_first(out, data[i]);
      continue;
    }
    store_evict_first(out, kv_fp8::fp8x8_to_bf16x8(make_uint2(data[i].x, data[i].y), exponent[i]));
  }
}

// 16 threads an entry: 8 codes in, 8 floats (32 B) out per thread.
__global__ void __launch_bounds__(kThreads) kv_gather_indexer(Gather a) {
#if defined(DSV4H_MUTANT_NOOP)
  if (a.n >= 0) return;
#endif
  const int t = threadIdx.x % kIndexerThreadsPerEntry;
  int64_t row[kSteps];
  int32_t slot[kSteps];
  load_slots<kIndexerThreadsPerEntry>(a, row, slot);
  uint2 codes[kSteps];
  float scale[kSteps];
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    codes[i] = make_uint2(0, 0);
    scale[i] = 0.f;
    if (slot[i] < 0 || slot[i] >= a.pool_slots) continue;  // no entry (-1) or bad input: zeros, nothing read
    const kv_fp8::SlotPlace place = kv_fp8::place_of(slot[i], a.by_page, static_cast<uint32_t>(a.tokens_per_page));
    const uint8_t* page = a.layer_base + place.page * a.page_bytes;
    const int64_t entry = place.entry;
    codes[i] = load_read_only(reinterpret_cast<const uint2*>(page + entry * 128) + t);
    scale[i] = *reinterpret_cast<const float*>(page + a.tokens_per_page * 128 + entry * 4);
  }
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    if (row[i] >= a.n) continue;
    float4* out = reinterpret_cast<float4*>(static_cast<float*>(a.out) + row[i] * 128 + t * 8);
    if (slot[i] < 0 || slot[i] >= a.pool_slots) {
      out[0] = out[1] = make_float4(0.f, 0.f, 0.f, 0.f);
      continue;
    }
    float v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j)
      v[j] = kv_fp8::fp8_e4m3_to_float(static_cast<uint8_t>((j < 4 ? codes[i].x : codes[i].y) >> (8 * (j % 4)))) * scale[i];
    out[0] = make_float4(v[0], v[1], v[2], v[3]);
    out[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}

Gather checked(const KvPoolBuffer& pool, int layer, const int32_t* slots, int64_t n, void* out, int64_t entry_bytes) {
  kv_require(n >= 0, "gather: n must be >= 0, got " + std::to_string(n));
  kv_require(pool.base && slots && out, "gather: null pointer");
  kv_require(layer >= 0 && layer < pool.layers, "gather: layer " + std::to_string(layer) + " outside [0, " +
                                                    std::to_string(pool.layers) + ")");
  // The MODEL1 rope is read 16 bytes at a time, indexer codes 8: pages aligned to that; every
  // output row is written in 16-byte vectors.
  const int64_t align = entry_bytes == 584 ? 16 : 8;
  kv_require(pool.tokens_per_page > 0 && pool.page_bytes >= pool.tokens_per_page * entry_bytes && pool.page_bytes % align == 0,
             "gather: page_bytes " + std::to_string(pool.page_bytes) + " does not fit the page format (a multiple of " +
                 std::to_string(align) + " bytes holding every entry)");
  kv_require(pool.slots() <= INT32_MAX && pool.tokens_per_page <= INT32_MAX, "gather: more than 2^31 slots or tokens a page in the pool");
  kv_require(reinterpret_cast<uintptr_t>(pool.base) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0,
             "gather: the pool and the output must be 16-byte aligned");
  return Gather{pool.base + layer * pool.layer_bytes(), pool.tokens_per_page, pool.page_bytes, pool.slots(),
                divider_for(static_cast<uint32_t>(pool.tokens_per_page)), slots, n, out};
}

}  // namespace

// Grids: one block of 256 threads per 16 latents or 64 keys (kSteps each per thread group), as in the store.
void launch_kv_gather_model1(const KvPoolBuffer& pool, int layer, const int32_t* slots, int64_t n, uint16_t* out,
                             hipStream_t stream) {
  const Gather a = checked(pool, layer, slots, n, out, 584);
  if (n == 0) return;
  kv_gather_model1<<<static_cast<unsigned>((n + kTokensPerBlock - 1) / kTokensPerBlock), kThreads, 0, stream>>>(a);
  DSV4H_LAUNCH_CHECK("kv_gather_model1");
}

void launch_kv_gather_indexer(const KvPoolBuffer& pool, int layer, const int32_t* slots, int64_t n, float* out,
                              hipStream_t stream) {
  const Gather a = checked(pool, layer, slots, n, out, 132);
  if (n == 0) return;
  kv_gather_indexer<<<static_cast<unsigned>((n + kEntriesPerBlock - 1) / kEntriesPerBlock), kThreads, 0, stream>>>(a);
  DSV4H_LAUNCH_CHECK("kv_gather_indexer");
}

}  // namespace dsv4h
