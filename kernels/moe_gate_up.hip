// GEMM1 of the filtered MoE (spec 8.1): gate_up[row] = bf16(W13[e] x[token]) for every token slot
// whose local expert e is not -1; a filtered row is written as zeros without reading its token or
// any weight (write_zeros_to_output), so that no expert -1 is ever indexed.
//
// The scalar path: AMD (gfx90a; no MFMA path is written), and on NVIDIA the shapes the tensor-core
// GEMM (moe_gate_up_mma.hip) does not take (moe_grouping.h: hidden or inter not a multiple of 8, or
// too narrow a hidden to hold the grouping); launch_moe_gate_up picks. Never chosen by the batch:
// the two paths sum in different orders, and a layer's rows must not change with their batch.
// One block per (row, tile of kColsPerTile output columns). The block stages the token's hidden
// row in shared memory as fp32; each group of 32 lanes computes one column at a time, the lanes
// striding over hidden (coalesced reads of the weight row), an fp32 fma each, then a butterfly sum
// over the lanes, and rounds once to bf16. The sum's order depends on hidden only: a row's result
// is the same whatever the batch. Weights are read once per row, not once per expert: the
// tensor-core path groups the rows instead.
//
// Grid: (tokens * topk, ceil(2 inter / kColsPerTile)), fixed by the arguments.
// NOOP writes nothing.
#include "moe.h"
#include "moe_grouping.h"

namespace dsv4h {
namespace {

constexpr int kThreads = 256;
constexpr int kLanes = 32;
constexpr int kGroups = kThreads / kLanes;
constexpr int kColsPerTile = 64;

__device__ __forceinline__ float bf16_to_float(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

__global__ void __launch_bounds__(kThreads) moe_gate_up(MoeArgs args) {
#if defined(DSV4H_MUTANT_NOOP)
  if (args.tokens >= 0) return;
#endif
  extern __shared__ float x[];
  const int64_t row = blockIdx.x;
  const int64_t cols = 2 * args.inter;
  const int64_t col0 = int64_t{blockIdx.y} * kColsPerTile;
  const int64_t col_end = col0 + kColsPerTile < cols ? col0 + kColsPerTile : cols;
  uint16_t* out = args.gate_up + row * cols;
  const int32_t expert = args.local_ids[row];
  if (expert < 0) {  // the whole block takes this branch: no barrier is skipped by part of it
    for (int64_t c = col0 + threadIdx.x; c < col_end; c += kThreads) out[c] = 0;
    return;
  }
  const uint16_t* token = args.hidden + (row / args.topk) * args.hidden_size;
  for (int64_t h = threadIdx.x; h < args.hidden_size; h += kThreads) x[h] = bf16_to_float(token[h]);
  sync_block();
  const int lane = static_cast<int>(threadIdx.x) % kLanes, group = static_cast<int>(threadIdx.x) / kLanes;
  const uint16_t* weights = args.gate_up_weights + int64_t{expert} * cols * args.hidden_size;
  for (int64_t c = col0 + group; c < col_end; c += kGroups) {
    const uint16_t* w = weights + c * args.hidden_size;
    float acc = 0.f;
    for (int64_t h = lane; h < args.hidden_size; h += kLanes) acc = fmaf(x[h], bf16_to_float(w[h]), acc);
    acc = sum_over_lanes(acc, kLanes);
    if (lane == 0) out[c] = static_cast<uint16_t>(pack_bf16x2_rn(acc, 0.f));
  }
}

}  // namespace

void launch_moe_gate_up(const MoeArgs& args, hipStream_t stream) {
  check_moe_args(args);
  const int64_t rows = args.tokens * args.topk;
  if (rows == 0) return;
  const MoeGrouping grouping = moe_grouping(args);
  if (grouping.tiled) return launch_moe_gate_up_mma(args, grouping, stream);
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>((2 * args.inter + kColsPerTile - 1) / kColsPerTile));
  moe_gate_up<<<grid, kThreads, args.hidden_size * sizeof(float), stream>>>(args);
  DSV4H_LAUNCH_CHECK("moe_gate_up");
}

}  // namespace dsv4h
