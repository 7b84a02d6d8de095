// The MoE's rows grouped by local expert, for the tensor-core GEMMs (moe_gate_up_mma.hip,
// moe_down_mma.hip): the plan (host, a function of the arguments only) and where the grouping lives.
//
// Why grouped: a tile of rows of one expert reads that expert's weights once for all its rows; the
// scalar kernels (moe_gate_up.hip, moe_down.hip) read them once per row. moe_local_ids.hip writes
// the grouping on the device right after the local ids (no host sync: the MoE runs inside captured
// graphs): group g < local_experts holds the rows of local expert g, group local_experts the
// filtered rows (-1), which the GEMMs write as zeros.
//
// Where: the layer's partial `out` ([tokens, hidden] fp32), which nothing reads before the combine
// writes every element of it, holds the grouping as int32 until then:
//   [0, G]            row_offsets:  group g's rows are rows_sorted[row_offsets[g], row_offsets[g+1])
//   [G+1, 2G+1]       tile_offsets: group g's row tiles are the GEMM grid's x in [tile_offsets[g], [g+1])
//   [2G+2, 2G+2+rows) rows_sorted:  row ids (token * topk + slot), grouped; within a group in no set
//                                   order (each row's result depends on its own inputs only)
// with G = local_experts + 1. That takes 2G + 2 + tokens * topk <= tokens * hidden ints, which holds
// for every tokens >= 1 where hidden >= topk + 2 local_experts + 4: a condition on the layer's
// shape, not on the batch, so that a layer never changes path (and results) with its batch.
//
// Decode (tokens 1..8) takes the tensor-core path too, not the scalar kernels: a path chosen by the
// batch would make a row's bits depend on its batch (the batch-invariance relations and the graph
// buckets' replays compare bitwise), and at decode the cost is the weights' bytes, which the decode
// tiles stream with 16-byte cp.async copies, seven steps of K in flight, where the scalar kernels
// load 2 bytes a lane and read an expert's weights again for each of its rows. The extra work, an
// mma over 16 rows where 1 or 2 are real, costs tensor-core time the memory-bound step leaves idle.
#pragma once

#include <cstdint>

#include "moe.h"

namespace dsv4h {

struct MoeGrouping {
  bool tiled = false;      // the tensor-core GEMMs (NVIDIA, shapes below); else the scalar kernels
  int tile_rows = 0;       // rows a GEMM tile: 16 (decode) or 64 (prefill); each row's sum is alike
  int64_t groups = 0;      // G = local_experts + 1
  int32_t* row_offsets = nullptr;
  int32_t* tile_offsets = nullptr;
  int32_t* rows_sorted = nullptr;
  int64_t max_tiles = 0;   // the most row tiles any grouping needs: ceil(rows / T) + min(G, rows) - 1, at most rows
};

// The tiled path's conditions: NVIDIA (AMD keeps the scalar kernels: no MFMA path is written),
// hidden and inter multiples of 8 (16-byte rows for cp.async), hidden >= topk + 2 local_experts + 4
// (the grouping fits in `out`), local_experts <= kMoeMaxGroupedExperts (its counters fit in shared
// memory). tile_rows: 64 where the token slots (filtered ones included) average at least 128 a local
// expert (prefill), else 16. The path depends on the layer's shape only, local_experts included: a
// layer whose rank split changes the capacity condition sums in the other order (none of today's
// configs does; an int32 workspace in MoeArgs would remove the condition).
constexpr int64_t kMoeMaxGroupedExperts = 1024;
MoeGrouping moe_grouping(const MoeArgs& args);

// The tensor-core GEMMs; launch_moe_gate_up and launch_moe_down call them where grouping.tiled.
void launch_moe_gate_up_mma(const MoeArgs& args, const MoeGrouping& grouping, hipStream_t stream);
void launch_moe_down_mma(const MoeArgs& args, const MoeGrouping& grouping, hipStream_t stream);

}  // namespace dsv4h
