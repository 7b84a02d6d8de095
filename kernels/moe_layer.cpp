// The filtered MoE of one expert-parallel rank as one launch sequence (spec 8.1): local ids, GEMM1,
// the filtered activation, GEMM2, the combine. Every stage reads the same local ids, so the filter
// is one flag for GEMM1, the activation and GEMM2 (review finding 4). No kernel of its own: host
// code, a .cpp (kernels/CMakeLists.txt), so that each .hip file is one kernel.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "filtered_silu_mul.h"
#include "moe.h"
#include "moe_grouping.h"

namespace dsv4h {

void check_moe_args(const MoeArgs& args) {
  const auto require = [](bool ok, const std::string& message) {
    if (!ok) throw std::invalid_argument("moe: " + message);
  };
  require(args.tokens >= 0, "tokens must be >= 0, got " + std::to_string(args.tokens));
  require(args.topk >= 1, "topk must be >= 1, got " + std::to_string(args.topk));
  require(args.hidden_size >= 1 && args.hidden_size <= kMoeMaxRowWidth,
          "hidden_size must be in [1, " + std::to_string(kMoeMaxRowWidth) + "], got " + std::to_string(args.hidden_size));
  require(args.inter >= 1 && args.inter <= kMoeMaxRowWidth,
          "inter must be in [1, " + std::to_string(kMoeMaxRowWidth) + "], got " + std::to_string(args.inter));
  require(args.local_experts >= 1, "local_experts must be >= 1, got " + std::to_string(args.local_experts));
  require(args.first_expert >= 0, "first_expert must be >= 0, got " + std::to_string(args.first_expert));
  require(args.tokens <= INT32_MAX / args.topk, "tokens * topk must be below 2^31 (int32 row ids and offsets)");
  require(args.route_scale > 0.f, "route_scale must be > 0");
  require(args.tokens == 0 || (args.hidden && args.topk_ids && args.topk_weights && args.gate_up_weights &&
                               args.down_weights && args.local_ids && args.gate_up && args.act && args.down && args.out),
          "null device pointer");
  // `out` holds the rows' grouping until the combine: a buffer overlapping it would overwrite the
  // grouping, or be overwritten (host pointer arithmetic only: safe under graph capture).
  const auto overlaps_out = [&](const void* p, int64_t bytes) {
    const auto a = reinterpret_cast<uintptr_t>(args.out), b = reinterpret_cast<uintptr_t>(p);
    return b < a + static_cast<uintptr_t>(args.tokens * args.hidden_size * 4) && a < b + static_cast<uintptr_t>(bytes);
  };
  const int64_t rows = args.tokens * args.topk;
  require(args.tokens == 0 ||
              !(overlaps_out(args.hidden, args.tokens * args.hidden_size * 2) ||
                overlaps_out(args.topk_ids, rows * 4) || overlaps_out(args.topk_weights, rows * 4) ||
                overlaps_out(args.local_ids, rows * 4) || overlaps_out(args.gate_up, rows * 2 * args.inter * 2) ||
                overlaps_out(args.act, rows * args.inter * 2) || overlaps_out(args.down, rows * args.hidden_size * 4)),
          "out overlaps another buffer (it holds the rows' grouping until the combine)");
}

MoeGrouping moe_grouping(const MoeArgs& args) {
  MoeGrouping g;
#if defined(DSV4H_GPU_NVIDIA)
  g.tiled = args.hidden_size % 8 == 0 && args.inter % 8 == 0 && args.local_experts <= kMoeMaxGroupedExperts &&
            args.hidden_size >= args.topk + 2 * args.local_experts + 4;
#endif
  if (!g.tiled) return g;
  const int64_t rows = args.tokens * args.topk;
  g.tile_rows = rows >= 128 * args.local_experts ? 64 : 16;
  g.groups = args.local_experts + 1;
  g.row_offsets = reinterpret_cast<int32_t*>(args.out);
  g.tile_offsets = g.row_offsets + g.groups + 1;
  g.rows_sorted = g.tile_offsets + g.groups + 1;
  // Every tile holds a row, and each non-empty group adds at most one partial tile: a decode step's
  // grid then grows with its rows, not with the rank's experts (1 token over 32 experts: 6 row tiles,
  // not 34).
  g.max_tiles = std::min<int64_t>(rows, (rows + g.tile_rows - 1) / g.tile_rows + std::min<int64_t>(g.groups, rows) - 1);
  return g;
}

void launch_moe(const MoeArgs& args, hipStream_t stream) {
  launch_moe_local_ids(args, stream);
  launch_moe_gate_up(args, stream);
  FilteredSiluMulArgs act;
  act.gate_up = args.gate_up;
  act.expert_ids = args.local_ids;
  act.out = args.act;
  act.rows = args.tokens * args.topk;
  act.inter = args.inter;
  act.expert_step = 1;
  act.swiglu_limit = args.swiglu_limit;
  launch_filtered_silu_mul(act, stream);
  launch_moe_down(args, stream);
  launch_moe_combine(args, stream);
}

}  // namespace dsv4h
