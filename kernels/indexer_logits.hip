// The lightning indexer's scores for one query row per request (decode; spec 3.3, 4.2):
//   logits[r, j] = k_scale_j * sum_h relu(q8_h . k8_j) * (w_h * q_scale_h)    for j < (p_r + 1) / 4
//   logits[r, j] = -inf                                                        for the rest of the width
// The factorisation is SGLang's: both scales are positive powers of two, so they leave relu alone
// and multiply exactly; q8 . k8 sums 128 products of two e4m3 values, each exact in fp32.
//
// This fp32 FMA kernel is the path on AMD; on NVIDIA launch_indexer_logits takes the tensor-core
// kernel of indexer_logits_mma.hip (the same output), and this one stays reachable as
// launch_indexer_logits_fma (tests/gpu/test_indexer_gpu.cpp checks it there too).
//
// Grid (pages, rows), 256 threads: a block scores one C4 page of one row, 64 entries, which is one
// contiguous 8 KB run of fp8 values and 256 bytes of scales in the pool (spec 4.2). The block
// stages the row's query (codes as fp32, [heads][128], 32 KB at 64 heads) and the page's keys
// (rows padded from 128 to 144 bytes, so that the 16-byte reads of 8 consecutive entries by a
// quarter warp fall in distinct banks) in shared memory. Thread t scores entry t % 64 against the
// heads of group t / 64 (a quarter of them): per 16 channels it converts its entry's 16 codes once
// and makes 16 FMAs per head, the query read as a broadcast (a warp shares its head group). The
// four groups' partial sums meet in shared memory. Pages wholly past the row's visible entries
// write -inf without reading the pool. Arithmetic is plain fp32 FMA: 2 FLOPs per (entry, head,
// channel), about 4 FMAs per byte read at 64 heads, so at bs >= 8 the kernel is bound by FMA
// throughput rather than by the pool's bytes (tests/bench/bench_indexer.cpp measures both floors,
// and BM_indexer_scores both kernels).
//
// Mutant INDEXER_MASK_OFF_BY_ONE: j <= (p + 1) / 4 counted visible (also in indexer_topk.hip).
#include <string>

#include "indexer.h"
#include "kv_pool_fp8.h"

namespace dsv4h {
namespace {

constexpr int kThreads = 256;
constexpr int kEntries = kIndexerC4PageEntries;         // a block's entries: one page
constexpr int kGroups = kThreads / kEntries;            // head groups
constexpr int kMaxHeadsPerGroup = kIndexerMaxHeads / kGroups;
constexpr int kDim = 128, kKeyStride = 144, kPageValueBytes = kEntries * kDim;

__device__ __forceinline__ int64_t visible_entries(int32_t position, int64_t width) {
#if defined(DSV4H_MUTANT_INDEXER_MASK_OFF_BY_ONE)
  return indexer_visible_entries(int64_t{position} + 4, width);  // (p + 5) / 4 = (p + 1) / 4 + 1
#else
  return indexer_visible_entries(position, width);
#endif
}

__global__ void __launch_bounds__(kThreads) indexer_logits_kernel(IndexerLogitsArgs args) {
#if defined(DSV4H_MUTANT_NOOP)
  if (args.rows >= 0) return;
#endif
  schedule_point();
  __shared__ float query[kIndexerMaxHeads * kDim];
  __shared__ float head_weight[kIndexerMaxHeads];
  __shared__ __align__(16) uint8_t keys[kEntries * kKeyStride];
  __shared__ float key_scale[kEntries];
  __shared__ float partial[kGroups][kEntries];
  const int t = threadIdx.x;
  const int64_t tile = blockIdx.x, row = blockIdx.y, width = args.pages * kEntries;
  const int64_t visible = visible_entries(args.positions[row], width);
  float* logits = args.logits + row * width + tile * kEntries;
  if (tile * kEntries >= visible) {
    if (t < kEntries) logits[t] = -__int_as_float(0x7f800000);
    return;
  }
  const int heads = static_cast<int>(args.heads), per_group = heads / kGroups;
  const uint8_t* page = args.cache + static_cast<int64_t>(args.page_table[row * args.pages + tile]) * (kEntries * (kDim + 4));
  for (int v = t; v < kPageValueBytes / 16; v += kThreads)  // 16 bytes at a time, entry v / 8, chunk v % 8
    *reinterpret_cast<uint4*>(keys + (v / 8) * kKeyStride + (v % 8) * 16) = reinterpret_cast<const uint4*>(page)[v];
  if (t < kEntries) key_scale[t] = reinterpret_cast<const float*>(page + kPageValueBytes)[t];
  const uint8_t* codes = args.q_fp8 + row * heads * kDim;
  for (int v = t; v < heads * kDim; v += kThreads) query[v] = kv_fp8::fp8_e4m3_to_float(codes[v]);
  if (t < heads) head_weight[t] = args.weights[row * heads + t] * args.q_scale[row * heads + t];
  sync_block();

  const int entry = t % kEntries, group = t / kEntries;
  float acc[kMaxHeadsPerGroup];
#pragma unroll
  for (int h = 0; h < kMaxHeadsPerGroup; ++h) acc[h] = 0.f;
  for (int d0 = 0; d0 < kDim; d0 += 16) {
    const uint4 packed = *reinterpret_cast<const uint4*>(keys + entry * kKeyStride + d0);
    const uint8_t* bytes = reinterpret_cast<const uint8_t*>(&packed);
    float k[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) k[i] = kv_fp8::fp8_e4m3_to_float(bytes[i]);
#pragma unroll
    for (int h = 0; h < kMaxHeadsPerGroup; ++h) {
      if (h < per_group) {  // a guard, not a break: the loop unrolls and acc stays in registers
        const float* q = query + (group * per_group + h) * kDim + d0;
#pragma unroll
        for (int i = 0; i < 16; ++i) acc[h] = fmaf(q[i], k[i], acc[h]);
      }
    }
  }
  float sum = 0.f;
#pragma unroll
  for (int h = 0; h < kMaxHeadsPerGroup; ++h)
    if (h < per_group) sum = fmaf(fmaxf(acc[h], 0.f), head_weight[group * per_group + h], sum);
  partial[group][entry] = sum;
  sync_block();
  if (t < kEntries) {
    float score = 0.f;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) score += partial[g][t];
    logits[t] = tile * kEntries + t < visible ? score * key_scale[t] : -__int_as_float(0x7f800000);
  }
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("indexer_logits: " + message);
}

}  // namespace

void validate_indexer_logits(const IndexerLogitsArgs& args) {
  require(args.rows >= 0 && args.rows <= 65535, "rows must be in [0, 65535], got " + std::to_string(args.rows));
  require(args.heads >= kGroups && args.heads <= kIndexerMaxHeads && args.heads % kGroups == 0,
          "heads must be a multiple of 4 in [4, 64], got " + std::to_string(args.heads));
  require(args.pages >= 1 && args.pages * kEntries < (int64_t{1} << 31), "pages must be in [1, 2^25)");
  require(args.pool_pages >= 1, "pool_pages must be >= 1");
  if (args.rows == 0) return;
  require(args.q_fp8 && args.q_scale && args.weights && args.positions && args.page_table && args.cache && args.logits,
          "null device pointer");
  require(reinterpret_cast<uintptr_t>(args.cache) % 16 == 0, "the cache must be 16-byte aligned");
}

void launch_indexer_logits_fma(const IndexerLogitsArgs& args, hipStream_t stream) {
  validate_indexer_logits(args);
  if (args.rows == 0) return;
  indexer_logits_kernel<<<dim3(static_cast<unsigned>(args.pages), static_cast<unsigned>(args.rows)), kThreads, 0, stream>>>(args);
  DSV4H_LAUNCH_CHECK("indexer_logits_kernel");
}

void launch_indexer_logits(const IndexerLogitsArgs& args, hipStream_t stream) {
#if defined(DSV4H_GPU_NVIDIA)
  launch_indexer_logits_mma(args, stream);
#else
  launch_indexer_logits_fma(args, stream);
#endif
}

}  // namespace dsv4h
