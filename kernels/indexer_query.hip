// The indexer query path (spec 3.3): rope on channels 64..127 at the token's position, the
// 128-point Hadamard rotation over sqrt(128), then fp8 e4m3 with one power-of-two scale per
// (token, head), 2^ceil(log2(max(amax, 1e-4) / 448)) (the indexer cache's rule, kv_pool_fp8.h).
//
// One block of 128 threads per (head, row), a thread per channel: the head's 128 values live in
// shared memory between the steps. The rope's angle pos * f_i is formed and turned into sine and
// cosine in double: in fp32 an angle of 64K radians is off by up to 4e-3 rad, enough to move about
// one fp8 code in ten across a rounding midpoint. The Hadamard rotation is the 7 butterfly stages
// of the Sylvester order, in fp32 (7 roundings a value); the amax a tree in shared memory. The
// codes are written as bytes (what the scoring kernel reads) and, where the caller asks, as their
// fp32 values (what the harness compares under fp8_quantised). A per-row kernel of bs * heads
// blocks: at decode sizes it is launch-bound, at prefill sizes bound by its 3 bytes a value.
#include <string>

#include "indexer.h"
#include "kv_pool_fp8.h"

namespace dsv4h {
namespace {

constexpr int kDim = 128;
constexpr int kIndexerScaleFloor = -22;  // max(amax, 1e-4) / 448 >= 2^-22

__global__ void __launch_bounds__(kDim) indexer_query_kernel(IndexerQueryArgs args) {
#if defined(DSV4H_MUTANT_NOOP)
  if (args.rows >= 0) return;
#endif
  schedule_point();
  __shared__ float values[kDim];
  __shared__ float amax[kDim];
  const int i = threadIdx.x;
  const int64_t head = blockIdx.x, row = blockIdx.y;
  const int64_t at = (row * args.heads + head) * kDim + i;
  values[i] = kv_fp8::bf16_to_float(args.q[at]);
  sync_block();
  float x = values[i];
  if (i >= kDim / 2) {  // rope: pairs (2k, 2k+1) of the last 64 channels turn by pos * f_k
    const int pair = (i - kDim / 2) / 2;
    double s = 0, c = 1;
    sincos(static_cast<double>(args.positions[row]) * args.freqs[pair], &s, &c);
    const float re = values[kDim / 2 + 2 * pair], im = values[kDim / 2 + 2 * pair + 1];
    x = (i % 2 == 0) ? re * static_cast<float>(c) - im * static_cast<float>(s)
                     : re * static_cast<float>(s) + im * static_cast<float>(c);
  }
  sync_block();
  values[i] = x;
  for (int half = 1; half < kDim; half *= 2) {
    sync_block();
    const float own = values[i], other = values[i ^ half];
    sync_block();
    values[i] = (i & half) ? other - own : own + other;
  }
  sync_block();
  x = values[i] * 0.08838834764831845f;  // 1 / sqrt(128)
  amax[i] = fabsf(x);
  for (int stride = kDim / 2; stride > 0; stride /= 2) {
    sync_block();
    if (i < stride) amax[i] = fmaxf(amax[i], amax[i + stride]);
  }
  sync_block();
  const int e = kv_fp8::scale_exponent(amax[0], kIndexerScaleFloor);
  const uint8_t code = kv_fp8::fp8_e4m3_rn(x * kv_fp8::exp2i(-e));
  if (args.q_fp8) args.q_fp8[at] = code;
  if (args.q_fp8_values) args.q_fp8_values[at] = kv_fp8::fp8_e4m3_to_float(code);
  if (i == 0) args.q_scale[row * args.heads + head] = kv_fp8::exp2i(e);
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("indexer_query: " + message);
}

}  // namespace

void launch_indexer_query(const IndexerQueryArgs& args, hipStream_t stream) {
  require(args.rows >= 0 && args.rows <= 65535, "rows must be in [0, 65535], got " + std::to_string(args.rows));
  require(args.heads >= 1 && args.heads <= kIndexerMaxHeads, "heads must be in [1, 64], got " + std::to_string(args.heads));
  if (args.rows == 0) return;
  require(args.q && args.positions && args.q_scale && (args.q_fp8 || args.q_fp8_values), "null device pointer");
  indexer_query_kernel<<<dim3(static_cast<unsigned>(args.heads), static_cast<unsigned>(args.rows)), kDim, 0, stream>>>(args);
  DSV4H_LAUNCH_CHECK("indexer_query_kernel");
}

}  // namespace dsv4h
