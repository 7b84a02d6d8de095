// The GPU forward's glue kernels (glue_kernels.h): the model's small ops between the component
// kernels. They are not components (no descriptor, no mutant): each is checked through the op it
// serves by the model's bisection against the fp64 reference (harness/model/bisect.h), so they
// stay plain and obviously right rather than fast: fp64 where the reference's math has a norm, a
// rope angle or an exponential, one rounding at the end. One file for all of them, beside the
// forward that alone uses them.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "glue_kernels.h"
#include "kernels/mhc.h"  // bf16_bits_to_double, bf16_from_double

namespace dsv4h::model::gpu {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__device__ __forceinline__ float bf16_to_f(uint16_t bits) { return __uint_as_float(static_cast<uint32_t>(bits) << 16); }
__device__ __forceinline__ uint16_t f_to_bf16(float v) { return static_cast<uint16_t>(pack_bf16x2_rn(v, 0.f) & 0xffffu); }

template <typename T>
__device__ __forceinline__ float as_float(T v);
template <>
__device__ __forceinline__ float as_float<uint16_t>(uint16_t v) { return bf16_to_f(v); }
template <>
__device__ __forceinline__ float as_float<float>(float v) { return v; }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ uint16_t from_float<uint16_t>(float v) { return f_to_bf16(v); }
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }

// A block's sum of one double a thread (blockDim.x == kThreads).
__device__ double block_sum(double v) {
  __shared__ double partial[kThreads];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const double total = partial[0];
  __syncthreads();
  return total;
}

__global__ void embed_kernel(const uint16_t* table, const int32_t* tokens, int64_t T, int64_t dim, int64_t copies,
                             uint16_t* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= T * copies * dim) return;
  const int64_t t = i / (copies * dim), k = i % dim;
  out[i] = table[static_cast<int64_t>(tokens[t]) * dim + k];
}

__global__ void bf16_to_f32_kernel(const uint16_t* in, int64_t n, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < n) out[i] = bf16_to_f(in[i]);
}

// One block per (row, output head); 512 dims, two a thread.
__global__ void head_rope_kernel(HeadRopeArgs a) {
  const int64_t t = blockIdx.x, h = blockIdx.y;
  uint16_t* out = a.out + (t * a.out_heads + h) * 512;
  if (h >= a.heads) {
    for (int k = threadIdx.x; k < 512; k += kThreads) out[k] = 0;
    return;
  }
  const uint16_t* x = a.x + (t * a.heads + h) * 512;
  const int k0 = 2 * static_cast<int>(threadIdx.x);
  double v0 = bf16_bits_to_double(x[k0]), v1 = bf16_bits_to_double(x[k0 + 1]);
  if (a.norm) {
    const double r = 1.0 / sqrt(block_sum(v0 * v0 + v1 * v1) / 512.0 + a.eps);
    v0 *= r, v1 *= r;
  }
  if (k0 >= 512 - 64) {  // the rope slice: pair i = (k0 - 448) / 2 of the last 64 dims
    const int64_t position = a.positions ? a.positions[t] : a.first_pos + t;
    const double angle = static_cast<double>(position) * a.freqs[(k0 - 448) / 2];
    const double c = cos(angle), s = sin(angle), re = v0, im = v1;
    v0 = re * c - im * s;
    v1 = re * s + im * c;
  }
  out[k0] = bf16_from_double(v0);
  out[k0 + 1] = bf16_from_double(v1);
}

__global__ void mtp_input_kernel(const uint16_t* e_proj, const uint16_t* h_proj, int64_t T, int64_t hc, int64_t dim,
                                 uint16_t* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= T * hc * dim) return;
  const int64_t t = i / (hc * dim), s = (i / dim) % hc, k = i % dim;
  out[i] = bf16_from_double(bf16_bits_to_double(e_proj[t * dim + k]) + bf16_bits_to_double(h_proj[(t * hc + s) * dim + k]));
}

// One block a row; hc <= 8 mixes.
__global__ void head_hc_kernel(const uint16_t* h, const float* fn, const float* scale, const float* base, int64_t hc,
                               int64_t dim, double hc_eps, double norm_eps, uint16_t* out) {
  const int64_t t = blockIdx.x, width = hc * dim;
  const uint16_t* row = h + t * width;
  double squares = 0;
  for (int64_t k = threadIdx.x; k < width; k += kThreads) {
    const double v = bf16_bits_to_double(row[k]);
    squares += v * v;
  }
  const double r = 1.0 / sqrt(block_sum(squares) / static_cast<double>(width) + norm_eps);
  double weight[8];
  for (int64_t i = 0; i < hc; ++i) {
    double dot = 0;
    for (int64_t k = threadIdx.x; k < width; k += kThreads) dot += static_cast<double>(fn[i * width + k]) * bf16_bits_to_double(row[k]);
    const double mix = block_sum(dot) * r;
    weight[i] = 1.0 / (1.0 + exp(-(mix * static_cast<double>(scale[0]) + static_cast<double>(base[i])))) + hc_eps;
  }
  for (int64_t k = threadIdx.x; k < dim; k += kThreads) {
    double x = 0;
    for (int64_t i = 0; i < hc; ++i) x += weight[i] * bf16_bits_to_double(row[i * dim + k]);
    out[t * dim + k] = bf16_from_double(x);
  }
}

__global__ void sum_to_bf16_kernel(const float* a, const float* b, int64_t n, uint16_t* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < n) out[i] = bf16_from_double(static_cast<double>(a[i]) + static_cast<double>(b[i]));
}

__global__ void accumulate_kernel(float* acc, const float* part, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < n) acc[i] += part[i];
}

// One thread an output element; a 16 x 16 tile of outputs a block, x and W staged in shared memory.
template <typename TIn, typename TOut>
__global__ void plain_gemm_kernel(const TIn* x, int64_t ldx, const TIn* w, int64_t ldw, TOut* y, int64_t ldy, int64_t rows,
                                  int64_t in, int64_t out, float alpha) {
  constexpr int kTile = 16;
  __shared__ float xs[kTile][kTile + 1], ws[kTile][kTile + 1];
  const int64_t r = static_cast<int64_t>(blockIdx.y) * kTile + threadIdx.y;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const int64_t w_row = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.y;
  float sum = 0.f;
  for (int64_t k0 = 0; k0 < in; k0 += kTile) {
    const int64_t k = k0 + threadIdx.x;
    xs[threadIdx.y][threadIdx.x] = r < rows && k < in ? as_float(x[r * ldx + k]) : 0.f;
    ws[threadIdx.y][threadIdx.x] = w_row < out && k < in ? as_float(w[w_row * ldw + k]) : 0.f;
    __syncthreads();
    for (int j = 0; j < kTile; ++j) sum += xs[threadIdx.y][j] * ws[threadIdx.x][j];
    __syncthreads();
  }
  if (r < rows && o < out) y[r * ldy + o] = from_float<TOut>(alpha * sum);
}

// Block (chunk, r): a chunk of kThreads * 4 float4s of row r's ring (grid.x chunks cover a ring).
__global__ void copy_rings_kernel(RingCopyArgs a) {
  const int64_t r = blockIdx.y;
  if (a.extend_len[r] == 0) return;
  const int64_t ring_float4s = a.rows_per_ring * a.row_floats / 4;
  const int64_t base = static_cast<int64_t>(a.ring_index[r]) * ring_float4s;
  const float4* src = reinterpret_cast<const float4*>(a.src) + base;
  float4* dst = reinterpret_cast<float4*>(a.dst) + base;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads * 4;
  const int64_t end = first + kThreads * 4 < ring_float4s ? first + kThreads * 4 : ring_float4s;
  for (int64_t i = first + threadIdx.x; i < end; i += kThreads)
    dst[i] = src[i];
}

// Eight consecutive inputs from a 16-byte aligned address: as loaded (one 16-byte word of bf16, two
// of fp32), and as floats.
template <typename T>
struct Raw8 {
  uint4 words[sizeof(T) / 2];
};
template <typename T>
__device__ __forceinline__ Raw8<T> load_raw8(const T* p) {
  Raw8<T> r;
  #pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(T) / 2); ++i) r.words[i] = reinterpret_cast<const uint4*>(p)[i];
  return r;
}
__device__ __forceinline__ void unpack8(const Raw8<uint16_t>& r, float (&v)[8]) {
  const uint32_t words[4] = {r.words[0].x, r.words[0].y, r.words[0].z, r.words[0].w};
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = bf16_to_f(static_cast<uint16_t>(words[i] & 0xffffu));
    v[2 * i + 1] = bf16_to_f(static_cast<uint16_t>(words[i] >> 16));
  }
}
__device__ __forceinline__ void unpack8(const Raw8<float>& r, float (&v)[8]) {
  const uint32_t words[8] = {r.words[0].x, r.words[0].y, r.words[0].z, r.words[0].w,
                             r.words[1].x, r.words[1].y, r.words[1].z, r.words[1].w};
  for (int i = 0; i < 8; ++i) v[i] = __uint_as_float(words[i]);
}
template <typename T>
__device__ __forceinline__ void load8(const T* p, float (&v)[8]) {
  unpack8(load_raw8(p), v);
}

// Lanes of 32 an output column o: lane l takes inputs 8 l.. + 256 j, every row's products summed
// in fp32, then across the 32 lanes. A lane loads kSkinnyLoads of its 16-byte weight vectors before
// it uses the first, so that a warp keeps 2 KB of weights in flight rather than 512 bytes: a GEMM of
// a few thousand columns is a few warps an SM, which the latency of one load at a time held to a
// fraction of the memory's bandwidth. It adds the vectors in the order it would one at a time.
// Rows (1, 2, 4 or 8, the fewest that hold `rows`) sizes a thread's sums, and the weights stay as
// loaded until used: its registers then follow the batch (bf16, sm_90a: 36 at 1 row, six blocks an
// SM; 80 at 8), where one kernel for 8 rows held 94 at every batch, two blocks an SM, 32 KB of weights
// in flight an SM at bs 1. Rows changes no sum: each row's products are added in the same order.
constexpr int kSkinnyLoads = 4;

template <int Rows, typename TIn, typename TOut>
__global__ void skinny_gemm_kernel(const TIn* x, int64_t ldx, const TIn* w, int64_t ldw, TOut* y, int64_t ldy, int rows,
                                   int64_t in, int64_t out, float alpha) {
  const int lane = threadIdx.x % 32;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  if (o >= out) return;
  float acc[Rows] = {};
  for (int64_t k0 = lane * 8; k0 < in; k0 += 32 * 8 * kSkinnyLoads) {
    Raw8<TIn> wr[kSkinnyLoads];
    #pragma unroll
    for (int u = 0; u < kSkinnyLoads; ++u)
      if (k0 + u * 256 < in) wr[u] = load_raw8(w + o * ldw + k0 + u * 256);
    #pragma unroll
    for (int u = 0; u < kSkinnyLoads; ++u) {
      const int64_t k = k0 + u * 256;
      float wv[8];
      unpack8(wr[u], wv);
      #pragma unroll
      for (int r = 0; r < Rows; ++r) {
        if (k >= in || r >= rows) continue;
        float xv[8];
        load8(x + r * ldx + k, xv);
        #pragma unroll
        for (int i = 0; i < 8; ++i) acc[r] = fmaf(xv[i], wv[i], acc[r]);
      }
    }
  }
  #pragma unroll
  for (int r = 0; r < Rows; ++r) {
    if (r >= rows) continue;
    const float sum = sum_over_lanes(acc[r], 32);  // within each 32-lane half of a 64-lane wavefront
    if (lane == 0) y[r * ldy + o] = from_float<TOut>(alpha * sum);
  }
}

void check(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("model GPU glue: " + what);
}

}  // namespace

void launch_embed(const uint16_t* table, const int32_t* tokens, int64_t T, int64_t dim, int64_t copies, uint16_t* out,
                  hipStream_t stream) {
  check(T >= 0 && dim > 0 && copies > 0, "embed: T >= 0, dim > 0 and copies > 0 required");
  if (T == 0) return;
  embed_kernel<<<blocks_for(T * copies * dim), kThreads, 0, stream>>>(table, tokens, T, dim, copies, out);
  DSV4H_LAUNCH_CHECK("embed_kernel");
}

void launch_bf16_to_f32(const uint16_t* in, int64_t n, float* out, hipStream_t stream) {
  if (n <= 0) return;
  bf16_to_f32_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, n, out);
  DSV4H_LAUNCH_CHECK("bf16_to_f32_kernel");
}

void launch_head_rope(const HeadRopeArgs& a, hipStream_t stream) {
  check(a.heads >= 1 && a.out_heads >= a.heads && a.out_heads <= 65535, "head_rope: 1 <= heads <= out_heads <= 65535");
  if (a.T == 0) return;
  head_rope_kernel<<<dim3(static_cast<unsigned>(a.T), static_cast<unsigned>(a.out_heads)), kThreads, 0, stream>>>(a);
  DSV4H_LAUNCH_CHECK("head_rope_kernel");
}

void launch_mtp_input(const uint16_t* e_proj, const uint16_t* h_proj, int64_t T, int64_t hc, int64_t dim, uint16_t* out,
                      hipStream_t stream) {
  if (T == 0) return;
  mtp_input_kernel<<<blocks_for(T * hc * dim), kThreads, 0, stream>>>(e_proj, h_proj, T, hc, dim, out);
  DSV4H_LAUNCH_CHECK("mtp_input_kernel");
}

void launch_head_hc(const uint16_t* h, const float* fn, const float* scale, const float* base, int64_t T, int64_t hc,
                    int64_t dim, double hc_eps, double norm_eps, uint16_t* out, hipStream_t stream) {
  check(hc >= 1 && hc <= 8, "head_hc: hc must be in [1, 8], got " + std::to_string(hc));
  if (T == 0) return;
  head_hc_kernel<<<static_cast<unsigned>(T), kThreads, 0, stream>>>(h, fn, scale, base, hc, dim, hc_eps, norm_eps, out);
  DSV4H_LAUNCH_CHECK("head_hc_kernel");
}

void launch_sum_to_bf16(const float* a, const float* b, int64_t n, uint16_t* out, hipStream_t stream) {
  if (n <= 0) return;
  sum_to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, n, out);
  DSV4H_LAUNCH_CHECK("sum_to_bf16_kernel");
}

void launch_accumulate(float* acc, const float* part, int64_t n, hipStream_t stream) {
  if (n <= 0) return;
  accumulate_kernel<<<blocks_for(n), kThreads, 0, stream>>>(acc, part, n);
  DSV4H_LAUNCH_CHECK("accumulate_kernel");
}

void launch_copy_rings(const RingCopyArgs& a, hipStream_t stream) {
  check(a.batch >= 0 && a.batch <= 65535 && a.rows_per_ring > 0 && a.row_floats > 0 && a.row_floats % 4 == 0,
        "copy_rings: batch in [0, 65535], rows_per_ring > 0 and row_floats a positive multiple of 4 required");
  check(reinterpret_cast<uintptr_t>(a.src) % 16 == 0 && reinterpret_cast<uintptr_t>(a.dst) % 16 == 0,
        "copy_rings: src and dst must be 16-byte aligned");
  if (a.batch == 0) return;
  const int64_t float4s = a.rows_per_ring * a.row_floats / 4, per_block = int64_t{kThreads} * 4;
  const dim3 grid(static_cast<unsigned>((float4s + per_block - 1) / per_block), static_cast<unsigned>(a.batch));
  copy_rings_kernel<<<grid, kThreads, 0, stream>>>(a);
  DSV4H_LAUNCH_CHECK("copy_rings_kernel");
}

template <typename TIn, typename TOut>
bool launch_skinny_gemm(const TIn* x, int64_t ldx, const TIn* w, int64_t ldw, TOut* y, int64_t ldy, int64_t rows,
                        int64_t in, int64_t out, float alpha, hipStream_t stream) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (rows < 1 || rows > kSkinnyRows || in % 8 || ldx % 8 || ldw % 8 || !aligned(x) || !aligned(w) || out < 1) return false;
  const int64_t blocks = (out + kThreads / 32 - 1) / (kThreads / 32);
  check(blocks <= 0x7fffffff, "skinny_gemm: out too large");
  const auto launch = [&](auto kernel) {
    kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, ldx, w, ldw, y, ldy, static_cast<int>(rows), in, out, alpha);
  };
  if (rows == 1) launch(skinny_gemm_kernel<1, TIn, TOut>);
  else if (rows == 2) launch(skinny_gemm_kernel<2, TIn, TOut>);
  else if (rows <= 4) launch(skinny_gemm_kernel<4, TIn, TOut>);
  else launch(skinny_gemm_kernel<kSkinnyRows, TIn, TOut>);
  DSV4H_LAUNCH_CHECK("skinny_gemm_kernel");
  return true;
}

template bool launch_skinny_gemm<uint16_t, uint16_t>(const uint16_t*, int64_t, const uint16_t*, int64_t, uint16_t*, int64_t,
                                                     int64_t, int64_t, int64_t, float, hipStream_t);
template bool launch_skinny_gemm<uint16_t, float>(const uint16_t*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t,
                                                  int64_t, int64_t, float, hipStream_t);
template bool launch_skinny_gemm<float, float>(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, int64_t,
                                               int64_t, float, hipStream_t);

template <typename TIn, typename TOut>
void launch_plain_gemm(const TIn* x, int64_t ldx, const TIn* w, int64_t ldw, TOut* y, int64_t ldy, int64_t rows, int64_t in,
                       int64_t out, float alpha, hipStream_t stream) {
  check(rows >= 0 && in > 0 && out > 0 && rows <= 65535 * 16, "plain_gemm: sizes out of range");
  if (rows == 0) return;
  const dim3 grid(static_cast<unsigned>((out + 15) / 16), static_cast<unsigned>((rows + 15) / 16));
  plain_gemm_kernel<TIn, TOut><<<grid, dim3(16, 16), 0, stream>>>(x, ldx, w, ldw, y, ldy, rows, in, out, alpha);
  DSV4H_LAUNCH_CHECK("plain_gemm_kernel");
}

template void launch_plain_gemm<uint16_t, uint16_t>(const uint16_t*, int64_t, const uint16_t*, int64_t, uint16_t*, int64_t,
                                                    int64_t, int64_t, int64_t, float, hipStream_t);
template void launch_plain_gemm<uint16_t, float>(const uint16_t*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t,
                                                 int64_t, int64_t, float, hipStream_t);
template void launch_plain_gemm<float, float>(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, int64_t,
                                              int64_t, float, hipStream_t);

}  // namespace dsv4h::model::gpu
