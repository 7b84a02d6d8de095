// GEMM1 of the filtered MoE on tensor cores (NVIDIA): gate_up[row] = bf16(W13[e] x[token]) for the
// rows grouped by local expert (moe_grouping.h), in tiles of (rows of one expert) x (output
// columns), mma.sync bf16 -> fp32 (moe_mma.h: the pipeline, and why the summation order is the same
// for every tile and within gate_up's tolerance, bf16_rounded_once), rounded once to bf16. The
// filtered group's tiles write their rows as zeros, reading no token and no weight.
//
// Grid: (grouping.max_tiles, ceil(2 inter / tile columns)), fixed by the arguments; x runs fastest,
// so the row tiles of one expert that share a column tile run side by side and its weights come
// from HBM once, the other tiles reading them from L2. Blocks past the grouping's last tile return.
// Tiles: moe_mma.h's decode and prefill tiles, picked by moe_grouping() by the batch (the sums are
// alike, so the results are too).
// NOOP writes nothing.
#include "moe_grouping.h"
#include "moe_mma.h"

namespace dsv4h {

#if defined(DSV4H_GPU_NVIDIA)
namespace {

using moe_mma::DecodeTile;
using moe_mma::PrefillTile;

template <class T>
__global__ void __launch_bounds__(T::kThreads) moe_gate_up_mma(MoeArgs args, MoeGrouping grouping) {
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
  const int64_t cols = 2 * args.inter, col0 = int64_t{blockIdx.y} * T::kCols;
  const int n_valid = static_cast<int>(cols - col0 < T::kCols ? cols - col0 : T::kCols);
  if (group == groups - 1) {  // the filtered rows: zeros, 8 bf16 a store (cols and col0 are multiples of 8)
    const int vectors = n_valid / 8;
    for (int v = threadIdx.x; v < count * vectors; v += T::kThreads) {
      const int64_t row = grouping.rows_sorted[first + v / vectors];
      *reinterpret_cast<uint4*>(args.gate_up + row * cols + col0 + v % vectors * 8) = make_uint4(0, 0, 0, 0);
    }
    return;
  }
  for (int r = threadIdx.x; r < T::kRows; r += T::kThreads) {
    const int32_t row = r < count ? grouping.rows_sorted[first + r] : -1;
    sh.rows[r] = row;
    sh.a_rows[r] = row >= 0 ? args.hidden + row / args.topk * args.hidden_size : nullptr;
  }
  sync_block();
  T tile;
  tile.run(sh, args.gate_up_weights + (int64_t{group} * cols + col0) * args.hidden_size, args.hidden_size, n_valid);
  for (int i = 0; i < T::kMi; ++i)
    for (int half = 0; half < 2; ++half) {
      const int r = T::row_of(i, 2 * half);
      if (r >= count) continue;
      uint16_t* out = args.gate_up + int64_t{sh.rows[r]} * cols + col0;
      for (int j = 0; j < T::kNi; ++j) {
        const int c = T::col_of(j);
        if (c < n_valid)
          *reinterpret_cast<uint32_t*>(out + c) = pack_bf16x2_rn(tile.acc[i][j][2 * half], tile.acc[i][j][2 * half + 1]);
      }
    }
}

template <class T>
void launch_tiles(const MoeArgs& args, const MoeGrouping& grouping, hipStream_t stream) {
  const dim3 grid(static_cast<unsigned>(grouping.max_tiles), static_cast<unsigned>((2 * args.inter + T::kCols - 1) / T::kCols));
  moe_gate_up_mma<T><<<grid, T::kThreads, 0, stream>>>(args, grouping);
  DSV4H_LAUNCH_CHECK("moe_gate_up_mma");
}

}  // namespace

void launch_moe_gate_up_mma(const MoeArgs& args, const MoeGrouping& grouping, hipStream_t stream) {
  if (grouping.tile_rows == PrefillTile::kRows) launch_tiles<PrefillTile>(args, grouping, stream);
  else launch_tiles<DecodeTile>(args, grouping, stream);
}
#else
void launch_moe_gate_up_mma(const MoeArgs&, const MoeGrouping&, hipStream_t) {
  throw std::logic_error("moe: the tensor-core GEMMs are NVIDIA's; moe_grouping() does not choose them here");
}
#endif

}  // namespace dsv4h
