// topk_transform_512's selection (spec 3.3): a row with n = (p + 1) / 4 visible entries keeps
// every one, in order, when n <= topk (then -1 to topk); otherwise the topk largest scores of
// logits[row, 0:n), in index order, ties at the boundary to the lower index (as the reference; the
// harness compares sets, and two runs bit for bit).
//
// One block of 512 threads per row. The selection is a radix select on the scores' order-preserving
// 32-bit keys, 8 bits a pass from the top: each pass histograms the digit of the keys that match
// the prefix chosen so far (shared-memory atomics), a suffix scan over the 256 bins finds the bin
// holding the topk-th largest, and the prefix grows by it. After 4 passes the prefix is the
// topk-th largest key T and `ties` the count of keys equal to T still needed; two last passes over
// contiguous runs a thread, with a scan over the threads between them, write every index with a
// key above T and the first `ties` equal to it, in index order. Six reads of the row's scores
// (64 KB at n = 16K, from L2) and no sort.
//
// Mutants: INDEXER_MASK_OFF_BY_ONE counts j <= (p + 1) / 4 visible (with indexer_logits.hip);
// INDEXER_TOPK_PADDED_WIDTH takes n as the padded width of the logits, not the row's length.
#include <string>

#include "indexer.h"

namespace dsv4h {
namespace {

constexpr int kThreads = 512, kBins = 256;

__device__ __forceinline__ int64_t visible_entries(int32_t position, int64_t width) {
#if defined(DSV4H_MUTANT_INDEXER_TOPK_PADDED_WIDTH)
  (void)position;
  return width;
#elif defined(DSV4H_MUTANT_INDEXER_MASK_OFF_BY_ONE)
  return indexer_visible_entries(int64_t{position} + 4, width);  // (p + 5) / 4 = (p + 1) / 4 + 1
#else
  return indexer_visible_entries(position, width);
#endif
}

// Larger float, larger key (finite values and infinities; the logits hold no NaN). -0 takes +0's
// key, in integer operations that no float optimisation folds: equal scores must have equal keys.
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t bits = __float_as_uint(x), u = (bits << 1) == 0 ? 0u : bits;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__global__ void __launch_bounds__(kThreads) indexer_topk_kernel(IndexerTopkArgs args) {
#if defined(DSV4H_MUTANT_NOOP)
  if (args.rows >= 0) return;
#endif
  schedule_point();
  __shared__ uint32_t bins[kBins];
  __shared__ uint64_t scan[kThreads];
  __shared__ uint32_t prefix, remaining;
  const int t = threadIdx.x;
  const int64_t row = blockIdx.x, topk = args.topk;
  const int64_t n = visible_entries(args.positions[row], args.width);
  int32_t* out = args.indices + row * topk;
  if (n <= topk) {
    for (int64_t i = t; i < topk; i += kThreads) out[i] = i < n ? static_cast<int32_t>(i) : -1;
    return;
  }
  const float* logits = args.logits + row * args.width;
  if (t == 0) {
    prefix = 0;
    remaining = static_cast<uint32_t>(topk);
  }
  for (int shift = 24; shift >= 0; shift -= 8) {
    const uint32_t known = shift == 24 ? 0u : ~0u << (shift + 8);
    if (t < kBins) bins[t] = 0;
    sync_block();
    const uint32_t want = prefix;
    for (int64_t j = t; j < n; j += kThreads) {
      const uint32_t key = order_key(logits[j]);
      if ((key & known) == want) atomicAdd(&bins[(key >> shift) & 0xffu], 1u);
    }
    sync_block();
    const uint32_t need = remaining;  // read before thread `digit` below may rewrite it
    // Suffix sums: bins[b] becomes the count of matching keys with a digit >= b.
    for (int offset = 1; offset < kBins; offset *= 2) {
      const uint32_t add = t < kBins && t + offset < kBins ? bins[t + offset] : 0u;
      sync_block();
      if (t < kBins) bins[t] += add;
      sync_block();
    }
    if (t < kBins) {
      const uint32_t at_least = bins[t], above = t + 1 < kBins ? bins[t + 1] : 0u;
      if (at_least >= need && above < need) {  // the topk-th largest has digit t
        prefix = want | (static_cast<uint32_t>(t) << shift);
        remaining = need - above;
      }
    }
    sync_block();
  }
  // The write is deterministic, as the harness's runs must be bit for bit: thread t takes the
  // contiguous run [t * run, (t + 1) * run) of the row, counts its keys above T and equal to T, an
  // exclusive scan over the threads places each run, and the indices go out in index order, those
  // above T first, then the first `ties` equal to T (the reference's tie-break: lower index).
  const uint32_t threshold = prefix, ties = remaining;
  const uint32_t above_total = static_cast<uint32_t>(topk) - ties;
  const int64_t run = (n + kThreads - 1) / kThreads, begin = t * run, end = begin + run < n ? begin + run : n;
  uint32_t above = 0, tied = 0;
  for (int64_t j = begin; j < end; ++j) {
    const uint32_t key = order_key(logits[j]);
    above += key > threshold;
    tied += key == threshold;
  }
  const uint64_t own = above | (static_cast<uint64_t>(tied) << 32);
  scan[t] = own;
  for (int offset = 1; offset < kThreads; offset *= 2) {
    sync_block();
    const uint64_t add = t >= offset ? scan[t - offset] : 0u;
    sync_block();
    scan[t] += add;
  }
  sync_block();
  const uint64_t before = scan[t] - own;
  uint32_t above_at = static_cast<uint32_t>(before), tie_at = static_cast<uint32_t>(before >> 32);
  for (int64_t j = begin; j < end; ++j) {
    const uint32_t key = order_key(logits[j]);
    if (key > threshold) {
      out[above_at++] = static_cast<int32_t>(j);
    } else if (key == threshold) {
      if (tie_at < ties) out[above_total + tie_at] = static_cast<int32_t>(j);
      ++tie_at;
    }
  }
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("indexer_topk: " + message);
}

}  // namespace

void launch_indexer_topk(const IndexerTopkArgs& args, hipStream_t stream) {
  require(args.rows >= 0 && args.rows < (int64_t{1} << 31), "rows must be in [0, 2^31)");
  require(args.width >= 1 && args.width < (int64_t{1} << 31), "width must be in [1, 2^31)");
  require(args.topk >= 1 && args.topk <= 4096, "topk must be in [1, 4096], got " + std::to_string(args.topk));
  if (args.rows == 0) return;
  require(args.logits && args.positions && args.indices, "null device pointer");
  indexer_topk_kernel<<<static_cast<unsigned>(args.rows), kThreads, 0, stream>>>(args);
  DSV4H_LAUNCH_CHECK("indexer_topk_kernel");
}

}  // namespace dsv4h
