// GEMM2 of the filtered MoE (spec 8.1, 8.3): down[row] = w[row] * (W2[e] act[row]) in fp32 for
// every token slot whose local expert e is not -1; a filtered row is written as zeros without
// reading its activation, which the filtered activation left unwritten (garbage: NaN where the
// harness poisons it), nor any weight. So a filtered slot contributes exactly 0.
//
// The scalar path, where GEMM1's is (moe_gate_up.hip; the tensor-core path: moe_down_mma.hip,
// which carries the same mutant). One block per (row, tile of kColsPerTile hidden columns),
// the activation row staged in shared memory as fp32, a group of 32 lanes per column striding over
// inter with fp32 fma and a butterfly sum; the routed weight multiplies the sum (MUL_ROUTED_WEIGHT).
//
// Grid: (tokens * topk, ceil(hidden / kColsPerTile)), fixed by the arguments.
// Mutant MOE_DOWN_READS_FILTERED (spec 8.3): a filtered row computed like a local one, with expert
// 0 (a kernel that ignores the filter indexes expert -1; 0 keeps the read in bounds), reading the
// activation's unwritten row. NOOP writes nothing.
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

__global__ void __launch_bounds__(kThreads) moe_down(MoeArgs args) {
#if defined(DSV4H_MUTANT_NOOP)
  if (args.tokens >= 0) return;
#endif
  extern __shared__ float a[];
  const int64_t row = blockIdx.x;
  const int64_t col0 = int64_t{blockIdx.y} * kColsPerTile;
  const int64_t col_end = col0 + kColsPerTile < args.hidden_size ? col0 + kColsPerTile : args.hidden_size;
  float* out = args.down + row * args.hidden_size;
  int32_t expert = args.local_ids[row];
#if defined(DSV4H_MUTANT_MOE_DOWN_READS_FILTERED)
  if (expert < 0) expert = 0;
#endif
  if (expert < 0) {  // the whole block takes this branch: no barrier is skipped by part of it
    for (int64_t c = col0 + threadIdx.x; c < col_end; c += kThreads) out[c] = 0.f;
    return;
  }
  const uint16_t* act = args.act + row * args.inter;
  for (int64_t i = threadIdx.x; i < args.inter; i += kThreads) a[i] = bf16_to_float(act[i]);
  sync_block();
  const float routed_weight = args.topk_weights[row];
  const int lane = static_cast<int>(threadIdx.x) % kLanes, group = static_cast<int>(threadIdx.x) / kLanes;
  const uint16_t* weights = args.down_weights + int64_t{expert} * args.hidden_size * args.inter;
  for (int64_t c = col0 + group; c < col_end; c += kGroups) {
    const uint16_t* w = weights + c * args.inter;
    float acc = 0.f;
    for (int64_t i = lane; i < args.inter; i += kLanes) acc = fmaf(a[i], bf16_to_float(w[i]), acc);
    acc = sum_over_lanes(acc, kLanes);
    if (lane == 0) out[c] = routed_weight * acc;
  }
}

}  // namespace

void launch_moe_down(const MoeArgs& args, hipStream_t stream) {
  check_moe_args(args);
  const int64_t rows = args.tokens * args.topk;
  if (rows == 0) return;
  const MoeGrouping grouping = moe_grouping(args);
  if (grouping.tiled) return launch_moe_down_mma(args, grouping, stream);
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>((args.hidden_size + kColsPerTile - 1) / kColsPerTile));
  moe_down<<<grid, kThreads, args.inter * sizeof(float), stream>>>(args);
  DSV4H_LAUNCH_CHECK("moe_down");
}

}  // namespace dsv4h
