// hc_post of the mHC hyper-connections (spec 2.2): the layer's output x written back into the 4
// residual streams, h_j = post_j x + sum_i comb[i][j] residual_i (the sum over the FIRST index of
// comb), in fp64 and rounded once to bf16 (kernels/mhc.h says why fp64).
//
// Design: one block per token (grid-stride over tokens); each thread takes a column k and reads
// x[k] and the 4 residual values once, writing the 4 outputs; the 20 mixing weights sit in
// registers.
//
// Mutants, compiled in only when the build defines one of them; the suite must catch each:
// DSV4H_MUTANT_POST_TRANSPOSED (comb[j][i] instead of comb[i][j]) and DSV4H_MUTANT_NOOP.
#include "mhc.h"

#include <stdexcept>
#include <string>

namespace dsv4h {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) mhc_post_kernel(MhcPostArgs args) {
  schedule_point();
#if defined(DSV4H_MUTANT_NOOP)
  if (args.tokens >= 0) return;
#endif
  for (int64_t t = blockIdx.x; t < args.tokens; t += gridDim.x) {
    double post[kHcMult], comb[kHcMult][kHcMult];
    for (int i = 0; i < kHcMult; ++i) {
      post[i] = args.post[t * kHcMult + i];
      for (int j = 0; j < kHcMult; ++j) {
#if defined(DSV4H_MUTANT_POST_TRANSPOSED)
        comb[i][j] = args.comb[(t * kHcMult + j) * kHcMult + i];
#else
        comb[i][j] = args.comb[(t * kHcMult + i) * kHcMult + j];
#endif
      }
    }
    const uint16_t* x = args.x + t * args.dim;
    const uint16_t* res = args.residual + t * kHcMult * args.dim;
    uint16_t* h = args.h + t * kHcMult * args.dim;
    for (int64_t k = threadIdx.x; k < args.dim; k += kThreads) {
      const double xk = bf16_bits_to_double(x[k]);
      double r[kHcMult];
      for (int i = 0; i < kHcMult; ++i) r[i] = bf16_bits_to_double(res[i * args.dim + k]);
      for (int j = 0; j < kHcMult; ++j) {
        double s = post[j] * xk;  // products of an fp32 and a bf16: exact in fp64
        for (int i = 0; i < kHcMult; ++i) s += comb[i][j] * r[i];
        h[j * args.dim + k] = bf16_from_double(s);
      }
    }
  }
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("mhc_post: " + message);
}

}  // namespace

void launch_mhc_post(const MhcPostArgs& args, hipStream_t stream) {
  require(args.tokens >= 0, "tokens must be >= 0, got " + std::to_string(args.tokens));
  require(args.dim > 0, "dim must be > 0, got " + std::to_string(args.dim));
  if (args.tokens == 0) return;
  require(args.x && args.residual && args.post && args.comb && args.h, "null device pointer");
  const int64_t blocks = args.tokens < 65536 ? args.tokens : 65536;
  mhc_post_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args);
  DSV4H_LAUNCH_CHECK("mhc_post_kernel");
}

}  // namespace dsv4h
