// The GPU forward's glue (issue 31): the model's small ops that no component kernel runs, each a
// plain kernel in glue_kernels.hip. bf16 values travel as their 16-bit patterns (kernels/*.h do the
// same); every launch is enqueued on `stream` without a host sync.
#pragma once

#include <cstdint>

#include "kernels/portability.h"

namespace dsv4h::model::gpu {

// out[t, i * dim + k] = table[tokens[t], k] for each of `copies` streams (exact: a gather).
void launch_embed(const uint16_t* table, const int32_t* tokens, int64_t T, int64_t dim, int64_t copies, uint16_t* out,
                  hipStream_t stream);

// bf16 rows to fp32 (the compressor's fp32 GEMMs take the normed input in fp32).
void launch_bf16_to_f32(const uint16_t* in, int64_t n, float* out, hipStream_t stream);

// Per (row t, head h < heads) of x [T, heads, 512] (row stride in_stride): optionally the head's
// RMS norm without weight (q's), then the interleaved rope of its last 64 dims at position
// first_pos + t (or positions[t] where given: a batch's rows, read on the device) by `freqs`, in
// fp64, rounded once to bf16 into out [T, out_heads, 512] (row stride out_heads * 512); heads
// [heads, out_heads) of out are zeros (sparse attention's padding to 16).
struct HeadRopeArgs {
  const uint16_t* x;
  uint16_t* out;
  int64_t T, heads, out_heads, first_pos;
  const int32_t* positions;
  bool norm;
  double eps;
  double freqs[32];
};
void launch_head_rope(const HeadRopeArgs& args, hipStream_t stream);

// The MTP block's input: out[t, i * dim + k] = e_proj[t, k] + h_proj[t * hc + i, k], rounded to bf16.
void launch_mtp_input(const uint16_t* e_proj, const uint16_t* h_proj, int64_t T, int64_t hc, int64_t dim, uint16_t* out,
                      hipStream_t stream);

// The head's hc reduction (block.h's hc_head) per row of h [T, hc * dim]: mixes fn h * rsqrt(mean
// h^2 + norm_eps), weights sigmoid(mix * scale + base) + hc_eps, x = sum_i weight_i h_i, in fp64,
// rounded once to bf16.
void launch_head_hc(const uint16_t* h, const float* fn, const float* scale, const float* base, int64_t T, int64_t hc,
                    int64_t dim, double hc_eps, double norm_eps, uint16_t* out, hipStream_t stream);

// out = bf16(a + b) elementwise (the MoE's routed and shared parts into the stream's bf16 x).
void launch_sum_to_bf16(const float* a, const float* b, int64_t n, uint16_t* out, hipStream_t stream);
// acc += part elementwise (an expert-parallel rank's partial into the sum over ranks).
void launch_accumulate(float* acc, const float* part, int64_t n, hipStream_t stream);

// The rings of a step's requests from `src` to `dst` (kernels/compressor.h's ring layout: ring q is
// rows q * rows_per_ring .. + rows_per_ring - 1 of row_floats floats each): ring ring_index[r] for
// each of the `batch` rows whose extend_len[r] is not 0 (a padding row's compressor reads and
// writes no ring). What a decode step's compressor carries over, where copying every request
// slot's ring (all of them, twice a call) took 74 of the tiny model's 1020 us at bs 1 (H100).
// Read on the device: nothing synchronises. row_floats a multiple of 4, the buffers 16-byte aligned.
struct RingCopyArgs {
  const float* src;
  float* dst;
  const int32_t* ring_index;
  const int32_t* extend_len;
  int64_t batch, rows_per_ring, row_floats;
};
void launch_copy_rings(const RingCopyArgs& args, hipStream_t stream);

// y [rows, out] = alpha * x [rows, in] W^T, W [out, in] row-major; element i of row r of x at
// x[r * ldx + i], of y at y[r * ldy + o], of W at w[o * ldw + i]; fp32 accumulation, rounded once to
// y's type. The GEMM of builds without a BLAS library (AMD without hipBLASLt): plain, not fast.
// T_in: uint16_t (bf16) or float for x and W; T_out: uint16_t (bf16) or float.
template <typename TIn, typename TOut>
void launch_plain_gemm(const TIn* x, int64_t ldx, const TIn* w, int64_t ldw, TOut* y, int64_t ldy, int64_t rows,
                       int64_t in, int64_t out, float alpha, hipStream_t stream);

// launch_plain_gemm's product for a decode step's few rows (rows <= kSkinnyRows), as a GEMV: a
// group of 32 lanes an output column, reading its weights once in 16-byte loads. False, launching
// nothing, where the shapes do not allow those loads (in, ldx and ldw multiples of 8; x and w
// 16-byte aligned) or rows exceed kSkinnyRows: the caller takes another GEMM.
constexpr int64_t kSkinnyRows = 8;
template <typename TIn, typename TOut>
bool launch_skinny_gemm(const TIn* x, int64_t ldx, const TIn* w, int64_t ldw, TOut* y, int64_t ldy, int64_t rows,
                        int64_t in, int64_t out, float alpha, hipStream_t stream);

}  // namespace dsv4h::model::gpu
