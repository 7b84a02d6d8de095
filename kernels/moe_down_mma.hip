// GEMM2 of the filtered MoE on tensor cores (NVIDIA): down[row] = w[row] * (W2[e] act[row]) in
// fp32 for the rows grouped by local expert (moe_grouping.h), in tiles of (rows of one expert) x
// (hidden columns), mma.sync bf16 -> fp32 (moe_mma.h: the pipeline, and why the summation order is
// the same for every tile and within down's tolerance, fp32_over_bf16_stage); the routed weight
// multiplies the sum (MUL_ROUTED_WEIGHT). The filtered group's tiles write their rows as zeros
// without reading their activation (left unwritten by the filtered activation: garbage) or any
// weight (spec 8.3), so a filtered slot contributes exactly 0.
//
// Grid and tiles as GEMM1's (moe_gate_up_mma.hip): (grouping.max_tiles, ceil(hidden / tile
// columns)), decode 16 x 32 and prefill 64 x 128.
// Mutant MOE_DOWN_READS_FILTERED (spec 8.3): the filtered group's tiles computed like an expert's,
// with expert 0 (a kernel that ignores the filter indexes expert -1; 0 keeps the read in bounds),
// reading the activation's unwritten rows. NOOP writes nothing.
#include "moe_grouping.h"
#include "moe_mma.h"

namespace dsv4h {

#if defined(DSV4H_GPU_NVIDIA)
namespace {

using moe_mma::DecodeTile;
using moe_mma::PrefillTile;

template <class T>
__global__ void __launch_bounds__(T::kThreads) moe_down_mma(MoeArgs args, MoeGrouping grouping) {
#if defined(DSV4H_MUTANT_NOOP)
  if (args.tokens >= 0) return;
#endif
  schedule_point();
  __shared__ typename T::Shared sh;
  const int groups = static_cast<int>(grouping.groups);
  int group = 0, first = 0, count = 0;
  if (!moe_mma::find_tile(grouping.tile_offsets, grouping.row_offsets, groups, static_cast<int>(blockIdx.x), T::kRows,
                          &group, &first, &count))
    return;
  const int64_t cols = args.hidden_size, col0 = int64_t{blockIdx.y} * T::kCols;
  const int n_valid = static_cast<int>(cols - col0 < T::kCols ? cols - col0 : T::kCols);
#if defined(DSV4H_MUTANT_MOE_DOWN_READS_FILTERED)
  if (group == groups - 1) group = 0;
#endif
  if (group == groups - 1) {  // the filtered rows: zeros, 4 floats a store (cols and col0 are multiples of 8)
    const int vectors = n_valid / 4;
    for (int v = threadIdx.x; v < count * vectors; v += T::kThreads) {
      const int64_t row = grouping.rows_sorted[first + v / vectors];
      *reinterpret_cast<float4*>(args.down + row * cols + col0 + v % vectors * 4) = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    return;
  }
  for (int r = threadIdx.x; r < T::kRows; r += T::kThreads) {
    const int32_t row = r < count ? grouping.rows_sorted[first + r] : -1;
    sh.rows[r] = row;
    sh.a_rows[r] = row >= 0 ? args.act + int64_t{row} * args.inter : nullptr;
  }
  sync_block();
  T tile;
  tile.run(sh, args.down_weights + (int64_t{group} * cols + col0) * args.inter, args.inter, n_valid);
  for (int i = 0; i < T::kMi; ++i)
    for (int half = 0; half < 2; ++half) {
      const int r = T::row_of(i, 2 * half);
      if (r >= count) continue;
      const float routed_weight = args.topk_weights[sh.rows[r]];
      float* out = args.down + int64_t{sh.rows[r]} * cols + col0;
      for (int j = 0; j < T::kNi; ++j) {
        const int c = T::col_of(j);
        if (c < n_valid)
          *reinterpret_cast<float2*>(out + c) =
              make_float2(routed_weight * tile.acc[i][j][2 * half], routed_weight * tile.acc[i][j][2 * half + 1]);
      }
    }
}

template <class T>
void launch_tiles(const MoeArgs& args, const MoeGrouping& grouping, hipStream_t stream) {
  const dim3 grid(static_cast<unsigned>(grouping.max_tiles), static_cast<unsigned>((args.hidden_size + T::kCols - 1) / T::kCols));
  moe_down_mma<T><<<grid, T::kThreads, 0, stream>>>(args, grouping);
  DSV4H_LAUNCH_CHECK("moe_down_mma");
}

}  // namespace

void launch_moe_down_mma(const MoeArgs& args, const MoeGrouping& grouping, hipStream_t stream) {
  if (grouping.tile_rows == PrefillTile::kRows) launch_tiles<PrefillTile>(args, grouping, stream);
  else launch_tiles<DecodeTile>(args, grouping, stream);
}
#else
void launch_moe_down_mma(const MoeArgs&, const MoeGrouping&, hipStream_t) {
  throw std::logic_error("moe: the tensor-core GEMMs are NVIDIA's; moe_grouping() does not choose them here");
}
#endif

}  // namespace dsv4h
