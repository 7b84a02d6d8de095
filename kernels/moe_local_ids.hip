// The rank's view of the routing (spec 8.1): local_ids[row] = topk_ids[row] - first_expert where
// the expert is one of the rank's, else -1 (another rank's expert, or a padded token). Every later
// stage filters on these ids, so the filter is one flag for the whole layer.
//
// Where the tensor-core GEMMs run (moe_grouping.h: NVIDIA, shapes it allows) the same kernel also
// groups the rows by local expert for them, in one block (a warp a 32 rows, up to 1024 threads) so
// that the grouping needs no launch of its own (decode is launch-bound) and no grid-wide barrier:
// count the rows of each group (shared-memory counters, one atomic per group per warp: a warp's
// lanes with the same group add together, as the filtered group takes most rows on a rank of 8),
// scan the counts and their tile counts (one warp), then place each row at its group's cursor. The
// order of rows within a group is not fixed; no result depends on it. A one-block pass over
// tokens * topk ids is short beside the GEMMs (prefill: 24576 ids, 24 a thread).
// Otherwise (the scalar GEMMs): one thread per token slot, ceil(rows / 256) blocks.
// Both grids are functions of the arguments only.
//
// Mutant MOE_GLOBAL_ID_AS_LOCAL: the rank's offset not subtracted, the global id used as the local
// index (clamped to the rank's last expert, so that the suite sees a wrong expert, not an
// out-of-bounds read; on rank 0 it is right). NOOP writes nothing.
#include "moe.h"
#include "moe_grouping.h"

namespace dsv4h {
namespace {

constexpr int kThreads = 256;
constexpr int kGroupingThreads = 1024;
constexpr int kLanes = 32;

// Adds one to counter[group] for each lane of the warp where `valid`, one atomic per distinct group,
// and returns the lane's slot: the counter's old value plus its rank among the warp's lanes of that
// group. Every lane of the warp calls it.
__device__ __forceinline__ int add_one_per_lane(int* counter, int group, bool valid) {
#if defined(DSV4H_GPU_NVIDIA)
  const int lane = static_cast<int>(threadIdx.x) % kLanes;
  const unsigned peers = __match_any_sync(0xffffffffu, valid ? group : -1);
  const int leader = __ffs(peers) - 1;
  int base = 0;
  if (lane == leader && valid) base = atomicAdd(&counter[group], __popc(peers));
  base = __shfl_sync(0xffffffffu, base, leader);
  return base + __popc(peers & ((1u << lane) - 1u));
#else
  return valid ? atomicAdd(&counter[group], 1) : 0;
#endif
}

__global__ void __launch_bounds__(kGroupingThreads) moe_local_ids(MoeArgs args, MoeGrouping grouping) {
#if defined(DSV4H_MUTANT_NOOP)
  if (args.tokens >= 0) return;
#endif
  schedule_point();
  __shared__ int counts[kMoeMaxGroupedExperts + 1], lane_rows[kLanes], lane_tiles[kLanes];
  const int64_t rows = args.tokens * args.topk;
  const int groups = static_cast<int>(grouping.groups), filtered = groups - 1;
  if (grouping.tiled) {
    for (int g = threadIdx.x; g < groups; g += blockDim.x) counts[g] = 0;
    sync_block();
  }
  // Warp-uniform trips (add_one_per_lane needs the whole warp); `row < rows` guards the rest.
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x / kLanes * kLanes; first < rows; first += step) {
    const int64_t row = first + threadIdx.x % kLanes;
    int32_t local_id = -1;
    if (row < rows) {
      const int64_t id = args.topk_ids[row];
      const bool local = id >= args.first_expert && id < args.first_expert + args.local_experts;
#if defined(DSV4H_MUTANT_MOE_GLOBAL_ID_AS_LOCAL)
      const int64_t index = id < args.local_experts - 1 ? id : args.local_experts - 1;
#else
      const int64_t index = id - args.first_expert;
#endif
      local_id = local ? static_cast<int32_t>(index) : -1;
      args.local_ids[row] = local_id;
    }
    if (grouping.tiled) add_one_per_lane(counts, local_id < 0 ? filtered : local_id, row < rows);
  }
  if (!grouping.tiled) return;  // uniform: the flag is an argument
  sync_block();
  // Exclusive scans of the rows and the row tiles of the groups: lane l sums groups
  // [l per, (l + 1) per), the lanes' totals are added up in order, then each lane writes its groups.
  const int per = (groups + kLanes - 1) / kLanes, lane = static_cast<int>(threadIdx.x);
  const int g_begin = lane * per < groups ? lane * per : groups, g_end = g_begin + per < groups ? g_begin + per : groups;
  if (threadIdx.x < kLanes) {
    int sum_rows = 0, sum_tiles = 0;
    for (int g = g_begin; g < g_end; ++g) {
      sum_rows += counts[g];
      sum_tiles += (counts[g] + grouping.tile_rows - 1) / grouping.tile_rows;
    }
    lane_rows[lane] = sum_rows;
    lane_tiles[lane] = sum_tiles;
  }
  sync_block();
  if (threadIdx.x < kLanes) {
    int row_offset = 0, tile_offset = 0;
    for (int l = 0; l < lane; ++l) {
      row_offset += lane_rows[l];
      tile_offset += lane_tiles[l];
    }
    for (int g = g_begin; g < g_end; ++g) {
      const int count = counts[g];
      grouping.row_offsets[g] = row_offset;
      grouping.tile_offsets[g] = tile_offset;
      counts[g] = row_offset;  // from here on: the group's cursor
      row_offset += count;
      tile_offset += (count + grouping.tile_rows - 1) / grouping.tile_rows;
    }
    if (lane == kLanes - 1) {
      grouping.row_offsets[groups] = row_offset;
      grouping.tile_offsets[groups] = tile_offset;
    }
  }
  sync_block();
  // Each thread reads back the ids it wrote itself above.
  for (int64_t first = threadIdx.x / kLanes * kLanes; first < rows; first += blockDim.x) {
    const int64_t row = first + threadIdx.x % kLanes;
    const int32_t local_id = row < rows ? args.local_ids[row] : -1;
    const int slot = add_one_per_lane(counts, local_id < 0 ? filtered : local_id, row < rows);
    if (row < rows) grouping.rows_sorted[slot] = static_cast<int32_t>(row);
  }
}

}  // namespace

void launch_moe_local_ids(const MoeArgs& args, hipStream_t stream) {
  check_moe_args(args);
  const int64_t rows = args.tokens * args.topk;
  if (rows == 0) return;
  const MoeGrouping grouping = moe_grouping(args);
  if (grouping.tiled) {
    const int64_t warps = (rows + kLanes - 1) / kLanes;
    const int threads = static_cast<int>(warps < kGroupingThreads / kLanes ? warps * kLanes : kGroupingThreads);
    moe_local_ids<<<1, threads, 0, stream>>>(args, grouping);
  } else {
    moe_local_ids<<<static_cast<unsigned>((rows + kThreads - 1) / kThreads), kThreads, 0, stream>>>(args, grouping);
  }
  DSV4H_LAUNCH_CHECK("moe_local_ids");
}

}  // namespace dsv4h
