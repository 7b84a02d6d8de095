// The combine of the filtered MoE (spec 8.1, 2.5): out[m] = route_scale * sum over slots of
// down[m * topk + slot], in slot order, in fp32. route_scale is applied here and nowhere else
// (the routed weights arrive without it). A token none of whose slots is local gets exactly 0 (its
// rows are zeros): the rank's partial, which the all-reduce adds to the other ranks'.
//
// One thread per output element; the grid covers tokens * hidden, fixed by the arguments.
// Mutant MOE_ROUTE_SCALE_TWICE: route_scale applied twice (once folded into the weights, once by
// the combine, spec 8.4's warning). NOOP writes nothing.
#include "moe.h"

namespace dsv4h {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) moe_combine(MoeArgs args) {
#if defined(DSV4H_MUTANT_NOOP)
  if (args.tokens >= 0) return;
#endif
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i >= args.tokens * args.hidden_size) return;
  const int64_t token = i / args.hidden_size, col = i % args.hidden_size;
  const float* down = args.down + token * args.topk * args.hidden_size + col;
  float sum = 0.f;
  for (int64_t slot = 0; slot < args.topk; ++slot) sum += down[slot * args.hidden_size];
#if defined(DSV4H_MUTANT_MOE_ROUTE_SCALE_TWICE)
  sum *= args.route_scale;
#endif
  args.out[i] = args.route_scale * sum;
}

}  // namespace

void launch_moe_combine(const MoeArgs& args, hipStream_t stream) {
  check_moe_args(args);
  const int64_t elements = args.tokens * args.hidden_size;
  if (elements == 0) return;
  moe_combine<<<static_cast<unsigned>((elements + kThreads - 1) / kThreads), kThreads, 0, stream>>>(args);
  DSV4H_LAUNCH_CHECK("moe_combine");
}

}  // namespace dsv4h
