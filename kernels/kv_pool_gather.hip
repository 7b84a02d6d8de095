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

struct Gather {
  const uint8_t* layer_base;
  int64_t tokens_per_page, page_bytes, pool_slots;
  const int32_t* slots;
  int64_t n;
  void* out;
};

// 64 threads a token as in the store: 8 fp8 codes (8 B) in, 8 bf16 (16 B) out per thread.
__global__ void __launch_bounds__(kThreads) kv_gather_model1(Gather a) {
#if defined(DSV4H_MUTANT_NOOP)
  if (a.n >= 0) return;
#endif
  const int64_t row = int64_t{blockIdx.x} * (kThreads / 64) + threadIdx.x / 64;
  const int t = threadIdx.x % 64;
  if (row >= a.n) return;
  const int32_t slot = a.slots[row];
  uint4* out = reinterpret_cast<uint4*>(static_cast<uint16_t*>(a.out) + row * 512) + t;
  if (slot < 0 || slot >= a.pool_slots) {  // no entry (-1) or bad input: zeros, nothing read
    *out = make_uint4(0, 0, 0, 0);
    return;
  }
  const uint8_t* page = a.layer_base + (slot / a.tokens_per_page) * a.page_bytes;
  const int64_t entry = slot % a.tokens_per_page;
  if (t >= 56) {
    *out = *reinterpret_cast<const uint4*>(page + entry * 576 + 448 + (t - 56) * 16);
    return;
  }
  const uint2 codes = *reinterpret_cast<const uint2*>(page + entry * 576 + t * 8);
  const int e = static_cast<int>(page[a.tokens_per_page * 576 + entry * 8 + t / 8]) - 127;
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t word = i < 2 ? codes.x : codes.y;
    const int shift = 16 * (i % 2);
    const uint16_t lo = kv_fp8::float_to_bf16(ldexpf(kv_fp8::fp8_e4m3_to_float(static_cast<uint8_t>(word >> shift)), e));
    const uint16_t hi = kv_fp8::float_to_bf16(ldexpf(kv_fp8::fp8_e4m3_to_float(static_cast<uint8_t>(word >> (shift + 8))), e));
    w[i] = lo | (static_cast<uint32_t>(hi) << 16);
  }
  *out = make_uint4(w[0], w[1], w[2], w[3]);
}

// 16 threads an entry: 8 codes in, 8 floats (32 B) out per thread.
__global__ void __launch_bounds__(kThreads) kv_gather_indexer(Gather a) {
#if defined(DSV4H_MUTANT_NOOP)
  if (a.n >= 0) return;
#endif
  const int64_t row = int64_t{blockIdx.x} * (kThreads / 16) + threadIdx.x / 16;
  const int t = threadIdx.x % 16;
  if (row >= a.n) return;
  const int32_t slot = a.slots[row];
  float4* out = reinterpret_cast<float4*>(static_cast<float*>(a.out) + row * 128 + t * 8);
  if (slot < 0 || slot >= a.pool_slots) {  // no entry (-1) or bad input: zeros, nothing read
    out[0] = out[1] = make_float4(0.f, 0.f, 0.f, 0.f);
    return;
  }
  const uint8_t* page = a.layer_base + (slot / a.tokens_per_page) * a.page_bytes;
  const int64_t entry = slot % a.tokens_per_page;
  const uint2 codes = *reinterpret_cast<const uint2*>(page + entry * 128 + t * 8);
  const float scale = *reinterpret_cast<const float*>(page + a.tokens_per_page * 128 + entry * 4);
  float v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = kv_fp8::fp8_e4m3_to_float(static_cast<uint8_t>((i < 4 ? codes.x : codes.y) >> (8 * (i % 4)))) * scale;
  out[0] = make_float4(v[0], v[1], v[2], v[3]);
  out[1] = make_float4(v[4], v[5], v[6], v[7]);
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
  kv_require(reinterpret_cast<uintptr_t>(pool.base) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0,
             "gather: the pool and the output must be 16-byte aligned");
  return Gather{pool.base + layer * pool.layer_bytes(), pool.tokens_per_page, pool.page_bytes, pool.slots(), slots, n, out};
}

}  // namespace

// Grids: one block of 256 threads per 4 latents or 16 keys, as in the store.
void launch_kv_gather_model1(const KvPoolBuffer& pool, int layer, const int32_t* slots, int64_t n, uint16_t* out,
                             hipStream_t stream) {
  const Gather a = checked(pool, layer, slots, n, out, 584);
  if (n == 0) return;
  kv_gather_model1<<<static_cast<unsigned>((n + 3) / 4), kThreads, 0, stream>>>(a);
  DSV4H_LAUNCH_CHECK("kv_gather_model1");
}

void launch_kv_gather_indexer(const KvPoolBuffer& pool, int layer, const int32_t* slots, int64_t n, float* out,
                              hipStream_t stream) {
  const Gather a = checked(pool, layer, slots, n, out, 132);
  if (n == 0) return;
  kv_gather_indexer<<<static_cast<unsigned>((n + 15) / 16), kThreads, 0, stream>>>(a);
  DSV4H_LAUNCH_CHECK("kv_gather_indexer");
}

}  // namespace dsv4h
