// The pool's bandwidth floors (kv_pool_floor.h): the MODEL1 store's and gather's bytes, 16 at a
// time, with the real kernels' grid (64 threads a token, 4 tokens a block of 256, kSteps tokens a
// thread group in flight: the store's rule for the scatter, kv_pool_launch.h; always 4 for the
// gather, as the gather) and their page addressing, and no arithmetic on the data.
#include "kv_pool_floor.h"

#include <string>

#include "kernels/kv_pool_fp8.h"
#include "kernels/kv_pool_launch.h"

namespace dsv4h {
namespace {

constexpr int kThreads = 256;
constexpr int kThreadsPerToken = 64;  // 16 bytes each: a 1024-byte row
constexpr int kGroups = kThreads / kThreadsPerToken;
constexpr int kGatherSteps = 4;
constexpr int kEntryPieces = 576 / 16;  // threads [0, 36) move the entry, thread 36 the 8 scale bytes

struct FloorArgs {
  const int32_t* slots;
  uint8_t* layer;  // layer 0 of the pool
  Divider by_page;
  uint32_t tokens_per_page, page_bytes, pool_slots;
  int64_t n;
  const uint4* rows_in;  // [n, 64] 16-byte pieces: the scatter's rows
  uint4* rows_out;       // the gather's
};

// Where piece t of slot `slot` lives: the entry's piece t (t < 36) or the slot's scale bytes (36).
__device__ __forceinline__ uint8_t* piece_of(const FloorArgs& a, int32_t slot, int t) {
  const kv_fp8::SlotPlace place = kv_fp8::place_of(slot, a.by_page, a.tokens_per_page);
  uint8_t* page = a.layer + size_t{place.page} * a.page_bytes;
  return t < kEntryPieces ? page + place.entry * 576 + t * 16 : page + size_t{a.tokens_per_page} * 576 + place.entry * 8;
}

__device__ __forceinline__ bool in_pool(const FloorArgs& a, int32_t slot) {
  return static_cast<uint32_t>(slot) < a.pool_slots;  // -1 is not
}

template <int kSteps>
__global__ void __launch_bounds__(kThreads) kv_scatter_floor(FloorArgs a) {
  const int t = threadIdx.x % kThreadsPerToken;
  int64_t row[kSteps];
  int32_t slot[kSteps];
  uint4 piece[kSteps];
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {  // every load first, as the store issues them
    row[i] = (int64_t{blockIdx.x} * kSteps + i) * kGroups + threadIdx.x / kThreadsPerToken;
    slot[i] = row[i] < a.n ? a.slots[row[i]] : 0;
    piece[i] = row[i] < a.n ? load_read_only(a.rows_in + row[i] * kThreadsPerToken + t) : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    if (slot[i] == 0 || !in_pool(a, slot[i]) || t > kEntryPieces) continue;  // the store skips the sink too
    uint8_t* to = piece_of(a, slot[i], t);
    if (t < kEntryPieces) *reinterpret_cast<uint4*>(to) = piece[i];
    else *reinterpret_cast<uint2*>(to) = make_uint2(piece[i].x, piece[i].y);
  }
}

__global__ void __launch_bounds__(kThreads) kv_gather_floor(FloorArgs a) {
  constexpr int kSteps = kGatherSteps;
  const int t = threadIdx.x % kThreadsPerToken;
  int64_t row[kSteps];
  int32_t slot[kSteps];
  uint4 piece[kSteps];
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {  // every slot first, then every data load, as the gather
    row[i] = (int64_t{blockIdx.x} * kSteps + i) * kGroups + threadIdx.x / kThreadsPerToken;
    slot[i] = row[i] < a.n ? a.slots[row[i]] : -1;
  }
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    piece[i] = make_uint4(0, 0, 0, 0);
    if (!in_pool(a, slot[i]) || t > kEntryPieces) continue;
    const uint8_t* from = piece_of(a, slot[i], t);
    if (t < kEntryPieces) {
      piece[i] = load_read_only(reinterpret_cast<const uint4*>(from));
    } else {
      const uint2 scales = load_read_only(reinterpret_cast<const uint2*>(from));
      piece[i].x = scales.x, piece[i].y = scales.y;
    }
  }
#pragma unroll
  for (int i = 0; i < kSteps; ++i)
    if (row[i] < a.n) store_evict_first(a.rows_out + row[i] * kThreadsPerToken + t, piece[i]);
}

FloorArgs checked(const char* name, const KvPoolBuffer& pool, const int32_t* slots, int64_t n, const uint16_t* rows_in,
                  uint16_t* rows_out) {
  const void* rows = rows_in ? static_cast<const void*>(rows_in) : rows_out;
  const std::string where = std::string(name) + ": ";
  kv_require(n >= 0 && n <= INT32_MAX, where + "n must be in [0, 2^31 - 1], got " + std::to_string(n));
  kv_require(pool.base && slots && rows, where + "null pointer");
  kv_require(pool.tokens_per_page > 0 && pool.tokens_per_page <= INT32_MAX && pool.slots() <= INT32_MAX,
             where + "tokens_per_page must be in [1, 2^31 - 1] and the pool below 2^31 slots");
  kv_require(pool.page_bytes >= pool.tokens_per_page * 584 && pool.page_bytes % 16 == 0 && pool.page_bytes <= UINT32_MAX,
             where + "page_bytes " + std::to_string(pool.page_bytes) + " must hold the page's entries, a multiple of 16 below 2^32");
  kv_require(reinterpret_cast<uintptr_t>(pool.base) % 16 == 0 && reinterpret_cast<uintptr_t>(rows) % 16 == 0,
             where + "the pool and the rows must be 16-byte aligned");
  return FloorArgs{slots, pool.base, divider_for(static_cast<uint32_t>(pool.tokens_per_page)),
                   static_cast<uint32_t>(pool.tokens_per_page), static_cast<uint32_t>(pool.page_bytes),
                   static_cast<uint32_t>(pool.slots()), n, reinterpret_cast<const uint4*>(rows_in),
                   reinterpret_cast<uint4*>(rows_out)};
}

unsigned blocks_for(int64_t n, int steps) { return static_cast<unsigned>((n + kGroups * steps - 1) / (kGroups * steps)); }

}  // namespace

void launch_kv_scatter_floor(const KvPoolBuffer& pool, const uint16_t* rows, const int32_t* slots, int64_t n,
                             hipStream_t stream) {
  const FloorArgs a = checked("kv_scatter_floor", pool, slots, n, rows, nullptr);
  if (n == 0) return;
  if (n <= kStoreOneStepTokens)
    kv_scatter_floor<1><<<blocks_for(n, 1), kThreads, 0, stream>>>(a);
  else
    kv_scatter_floor<kStoreBulkSteps><<<blocks_for(n, kStoreBulkSteps), kThreads, 0, stream>>>(a);
  DSV4H_LAUNCH_CHECK("kv_scatter_floor");
}

void launch_kv_gather_floor(const KvPoolBuffer& pool, const int32_t* slots, int64_t n, uint16_t* out, hipStream_t stream) {
  const FloorArgs a = checked("kv_gather_floor", pool, slots, n, nullptr, out);
  if (n == 0) return;
  kv_gather_floor<<<blocks_for(n, kGatherSteps), kThreads, 0, stream>>>(a);
  DSV4H_LAUNCH_CHECK("kv_gather_floor");
}

}  // namespace dsv4h
