// The filtered MoE of one expert-parallel rank as one launch sequence (spec 8.1): local ids, GEMM1,
// the filtered activation, GEMM2, the combine. Every stage reads the same local ids, so the filter
// is one flag for GEMM1, the activation and GEMM2 (review finding 4). No kernel of its own: host
// code, a .cpp (kernels/CMakeLists.txt), so that each .hip file is one kernel.
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
  require(args.tokens <= (int64_t{1} << 31) / args.topk, "tokens * topk must be below 2^31");
  require(args.route_scale > 0.f, "route_scale must be > 0");
  require(args.tokens == 0 || (args.hidden && args.topk_ids && args.topk_weights && args.gate_up_weights &&
                               args.down_weights && args.local_ids && args.gate_up && args.act && args.down && args.out),
          "null device pointer");
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
  g.max_tiles = (rows + g.tile_rows - 1) / g.tile_rows + g.groups;
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
