// The rank's view of the routing (spec 8.1): local_ids[row] = topk_ids[row] - first_expert where
// the expert is one of the rank's, else -1 (another rank's expert, or a padded token). Every later
// stage filters on these ids, so the filter is one flag for the whole layer.
//
// One thread per token slot; the grid covers tokens * topk, a function of the arguments only.
//
// Mutant MOE_GLOBAL_ID_AS_LOCAL: the rank's offset not subtracted, the global id used as the local
// index (clamped to the rank's last expert, so that the suite sees a wrong expert, not an
// out-of-bounds read; on rank 0 it is right). NOOP writes nothing.
#include "moe.h"

namespace dsv4h {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) moe_local_ids(MoeArgs args) {
#if defined(DSV4H_MUTANT_NOOP)
  if (args.tokens >= 0) return;
#endif
  const int64_t row = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (row >= args.tokens * args.topk) return;
  const int64_t id = args.topk_ids[row];
  const bool local = id >= args.first_expert && id < args.first_expert + args.local_experts;
#if defined(DSV4H_MUTANT_MOE_GLOBAL_ID_AS_LOCAL)
  const int64_t index = id < args.local_experts - 1 ? id : args.local_experts - 1;
#else
  const int64_t index = id - args.first_expert;
#endif
  args.local_ids[row] = local ? static_cast<int32_t>(index) : -1;
}

}  // namespace

void launch_moe_local_ids(const MoeArgs& args, hipStream_t stream) {
  check_moe_args(args);
  const int64_t rows = args.tokens * args.topk;
  if (rows == 0) return;
  moe_local_ids<<<static_cast<unsigned>((rows + kThreads - 1) / kThreads), kThreads, 0, stream>>>(args);
  DSV4H_LAUNCH_CHECK("moe_local_ids");
}

}  // namespace dsv4h
