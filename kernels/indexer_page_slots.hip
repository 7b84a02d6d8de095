// topk_transform_512's last step (spec 3.3): a raw C4 entry index i of a row becomes the slot
// page_table[row, i / 64] * 64 + i % 64 of the C4 pool (64 entries a page, spec 4.2); -1 stays -1.
// One thread per index, coalesced reads of the indices and writes of the slots; the page table
// read is a gather within the row's few pages (L2-resident). Elementwise and launch-bound at
// decode sizes.
//
// Mutant INDEXER_PAGE_128: pages of 128 entries (i >> 7, i & 127), the C4 page size confused with
// another pool's.
#include <string>

#include "indexer.h"

namespace dsv4h {
namespace {

constexpr int kThreads = 256;
#if defined(DSV4H_MUTANT_INDEXER_PAGE_128)
constexpr int kPageShift = 7;
#else
constexpr int kPageShift = 6;
#endif

__global__ void __launch_bounds__(kThreads) indexer_page_slots_kernel(IndexerPageSlotsArgs args) {
#if defined(DSV4H_MUTANT_NOOP)
  if (args.rows >= 0) return;
#endif
  const int64_t at = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (at >= args.rows * args.topk) return;
  const int32_t raw = args.indices[at];
  const int64_t row = at / args.topk;
  int32_t slot = -1;
  if (raw >= 0) {
    const int32_t page = args.page_table[row * args.pages + (raw >> kPageShift)];
    slot = (page << kPageShift) | (raw & ((1 << kPageShift) - 1));
  }
  args.page_slots[at] = slot;
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("indexer_page_slots: " + message);
}

}  // namespace

void launch_indexer_page_slots(const IndexerPageSlotsArgs& args, hipStream_t stream) {
  require(args.rows >= 0 && args.topk >= 1 && args.pages >= 1, "rows >= 0, topk >= 1 and pages >= 1 required");
  require(args.rows * args.topk < (int64_t{1} << 31), "rows * topk must be below 2^31");
  if (args.rows == 0) return;
  require(args.indices && args.page_table && args.page_slots, "null device pointer");
  const int64_t blocks = (args.rows * args.topk + kThreads - 1) / kThreads;
  indexer_page_slots_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args);
  DSV4H_LAUNCH_CHECK("indexer_page_slots_kernel");
}

}  // namespace dsv4h
