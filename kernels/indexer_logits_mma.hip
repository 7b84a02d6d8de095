// The lightning indexer's scores on NVIDIA tensor cores (spec 3.3, 4.2): the output of
// indexer_logits.hip's fp32 FMA kernel (the path where this one does not build, AMD), bit layout
// and padding alike:
//   logits[r, j] = k_scale_j * sum_h relu(q8_h . k8_j) * (w_h * q_scale_h)    for j < (p_r + 1) / 4
//   logits[r, j] = -inf                                                        for the rest of the width
//
// Numbers. Every e4m3 value is exactly an f16 (3 of f16's 10 fraction bits, e4m3's exponents and
// subnormals inside f16's normal range), so cvt.rn.f16x2.e4m3x2 converts the codes exactly and
// mma.sync.m16n8k16 f16 x f16 -> f32 multiplies them exactly; a head's dot is an f32 accumulation
// of its 128 exact products in 8 MMA steps of 16. Not the e4m3 MMA (m16n8k32): on Hopper its
// accumulator keeps about 13-14 significand bits (DeepSeek-V3 technical report, 3.3.2; the
// e8m13 accumulator PyTorch's fp8 notes measure), an error some 2^10 times the scores' fp32
// tolerance, and mma.sync has no e4m3 rate advantage there to pay for it (sm_90's fast fp8 path is
// wgmma). The descriptor's checks (harness/components/indexer.cpp) hold for this summation order:
// tests/cpu/test_indexer_mma_reference.cpp replays it, with a pessimistic model of the MMA's f32
// accumulation, on every verify case.
//
// Work. Grid (chunks of `pages_per_block` pages, rows), 4 warps: a block stages its row's query once
// as MMA A fragments (64 heads x 128 channels, f16, 16 KB of shared memory, heads past `heads`
// zero) and its warps take the chunk's half pages (32 entries) in turn. A warp's half page is the
// tile [64 heads] x [32 entries]: 4 x 4 MMA tiles of 16 x 8, 8 k-steps, its 32 entries' codes
// loaded straight from the pool into registers (lane (g, t) = (lane / 4, lane % 4) loads 2 x 16
// bytes of entry g of each 8-entry tile: 128-byte rows, whole 32-byte sectors), converted once,
// the query's fragments read from shared memory (512 bytes a fragment set per 32 entries). The
// channels are permuted alike on both sides, which leaves every dot unchanged: k-step s of lane t
// takes the 4 bytes at (s / 4) * 64 + t * 16 + (s % 4) * 4 of the entry and of the query head, its
// first two as the MMA's k = 2t, 2t + 1 and its last two as k = 8 + 2t, 9 + 2t. Then each lane
// sums relu(dot) * w_h over its 8 heads (rows g and g + 8 of each m-tile, an fp32 FMA chain), the 8
// lanes of an entry meet by butterfly (xor 4, 8, 16) and the k scale multiplies (a power of two).
// Pages, and half pages, wholly past the row's visible entries write -inf without reading the pool.
// Bytes: the visible entries' 132 bytes once and the row's 8 KB query once a block (L2-resident).
//
// Mutant INDEXER_MASK_OFF_BY_ONE: j <= (p + 1) / 4 counted visible (as in indexer_logits.hip).
#include <algorithm>
#include <string>

#include "indexer.h"

#if defined(DSV4H_GPU_NVIDIA)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error "indexer_logits_mma.hip needs sm_89 or newer (cvt.rn.f16x2.e4m3x2)"
#endif

namespace dsv4h {
namespace {

constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kDim = 128, kEntries = kIndexerC4PageEntries, kPageValueBytes = kEntries * kDim;
constexpr int64_t kPageBytes = kEntries * (kDim + 4);
constexpr int kWarpEntries = 32;  // a warp's tile: half a page
constexpr int kNTiles = kWarpEntries / 8, kMTiles = kIndexerMaxHeads / 16, kKSteps = kDim / 16;
constexpr int kMaxPagesPerBlock = 8;
constexpr int64_t kBlocksToFill = 2048;  // about 15 blocks an SM on a 132-SM H100 before chunks grow

__device__ __forceinline__ int64_t visible_entries(int32_t position, int64_t width) {
#if defined(DSV4H_MUTANT_INDEXER_MASK_OFF_BY_ONE)
  return indexer_visible_entries(int64_t{position} + 4, width);  // (p + 5) / 4 = (p + 1) / 4 + 1
#else
  return indexer_visible_entries(position, width);
#endif
}

// The byte offset in an entry (or a query head) of the 4 channels lane t takes at k-step s.
__device__ __forceinline__ int step_byte(int s, int t) { return (s / 4) * 64 + t * 16 + (s % 4) * 4; }

// Two e4m3 codes (the low 16 bits) as two f16, low to low; exact.
__device__ __forceinline__ uint32_t f16x2_of_e4m3x2(uint32_t codes) {
  uint32_t out;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(out) : "h"(static_cast<uint16_t>(codes)));
  return out;
}

// d += A (16 x 16, row-major, fragments a.x..a.w) * B (16 x 8, column-major, b0 b1), f32.
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const uint4& a, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

__global__ void __launch_bounds__(kThreads) indexer_logits_mma_kernel(IndexerLogitsArgs args, int pages_per_block) {
#if defined(DSV4H_MUTANT_NOOP)
  if (args.rows >= 0) return;
#endif
  schedule_point();
  // The query's A fragments: [m-tile][k-step][lane] -> a0..a3 of mma.m16n8k16 (rows g, g + 8; k
  // 2t, 2t + 1 then 8 + 2t, 9 + 2t of the permuted channels).
  __shared__ uint4 query[kMTiles][kKSteps][32];
  __shared__ float head_weight[kIndexerMaxHeads];
  const float minus_inf = -__int_as_float(0x7f800000);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const int64_t row = blockIdx.y, width = args.pages * kEntries;
  const int64_t visible = visible_entries(args.positions[row], width);
  const int64_t first_entry = static_cast<int64_t>(blockIdx.x) * pages_per_block * kEntries;
  const int64_t chunk_end = first_entry + static_cast<int64_t>(pages_per_block) * kEntries;
  const int64_t end_entry = chunk_end < width ? chunk_end : width;
  float* logits = args.logits + row * width;
  if (first_entry >= visible) {
    for (int64_t j = first_entry + threadIdx.x; j < end_entry; j += kThreads) logits[j] = minus_inf;
    return;
  }
  const int heads = static_cast<int>(args.heads), m_tiles = (heads + 15) / 16;
  const uint8_t* codes = args.q_fp8 + row * heads * kDim;
  for (int v = threadIdx.x; v < kMTiles * kKSteps * 32; v += kThreads) {
    const int m = v / (kKSteps * 32), s = v / 32 % kKSteps, l = v % 32;
    const int h = m * 16 + l / 4, byte = step_byte(s, l % 4);
    const uint32_t row_g = h < heads ? *reinterpret_cast<const uint32_t*>(codes + h * kDim + byte) : 0u;
    const uint32_t row_g8 = h + 8 < heads ? *reinterpret_cast<const uint32_t*>(codes + (h + 8) * kDim + byte) : 0u;
    query[m][s][l] = make_uint4(f16x2_of_e4m3x2(row_g), f16x2_of_e4m3x2(row_g8), f16x2_of_e4m3x2(row_g >> 16),
                                f16x2_of_e4m3x2(row_g8 >> 16));
  }
  if (threadIdx.x < kIndexerMaxHeads) {
    const int h = threadIdx.x;
    head_weight[h] = h < heads ? args.weights[row * heads + h] * args.q_scale[row * heads + h] : 0.f;
  }
  sync_block();
  float weight[kMTiles][2];
#pragma unroll
  for (int m = 0; m < kMTiles; ++m) weight[m][0] = head_weight[m * 16 + g], weight[m][1] = head_weight[m * 16 + g + 8];

  for (int64_t base = first_entry + warp * kWarpEntries; base < end_entry; base += kWarps * kWarpEntries) {
    if (base >= visible) {  // the warp's whole half page (base is the same in every lane)
      logits[base + lane] = minus_inf;
      continue;
    }
    const int in_page = static_cast<int>(base % kEntries);
    const uint8_t* page = args.cache + static_cast<int64_t>(args.page_table[row * args.pages + base / kEntries]) * kPageBytes;
    uint4 raw[kNTiles][2];
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) {
      const uint8_t* entry = page + (in_page + n * 8 + g) * kDim;
      raw[n][0] = load_read_only(reinterpret_cast<const uint4*>(entry + t * 16));
      raw[n][1] = load_read_only(reinterpret_cast<const uint4*>(entry + 64 + t * 16));
    }
    float acc[kMTiles][kNTiles][4];
#pragma unroll
    for (int m = 0; m < kMTiles; ++m)
#pragma unroll
      for (int n = 0; n < kNTiles; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[m][n][i] = 0.f;
#pragma unroll
    for (int s = 0; s < kKSteps; ++s) {
      uint32_t b[kNTiles][2];
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) {
        const uint32_t word = reinterpret_cast<const uint32_t*>(&raw[n][s / 4])[s % 4];
        b[n][0] = f16x2_of_e4m3x2(word);
        b[n][1] = f16x2_of_e4m3x2(word >> 16);
      }
#pragma unroll
      for (int m = 0; m < kMTiles; ++m) {
        if (m < m_tiles) {  // a guard, not a break: the loops unroll and acc stays in registers
          const uint4 a = query[m][s][lane];
#pragma unroll
          for (int n = 0; n < kNTiles; ++n) mma_16x8x16(acc[m][n], a, b[n][0], b[n][1]);
        }
      }
    }
    // acc[m][n] holds heads 16m + g (0, 1) and 16m + g + 8 (2, 3) of entries 8n + 2t (0, 2) and
    // 8n + 2t + 1 (1, 3).
    float out[2] = {0.f, 0.f};
#pragma unroll
    for (int n = 0; n < kNTiles; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float sum = 0.f;
#pragma unroll
        for (int m = 0; m < kMTiles; ++m) {
          if (m < m_tiles) {
            sum = fmaf(fmaxf(acc[m][n][e], 0.f), weight[m][0], sum);
            sum = fmaf(fmaxf(acc[m][n][2 + e], 0.f), weight[m][1], sum);
          }
        }
#pragma unroll
        for (int offset = 4; offset < 32; offset *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
        if (n == g) out[e] = sum;  // every lane of the entry has it; lane (n, t) writes tile n
      }
    if (g < kNTiles) {
      const int column = in_page + g * 8 + 2 * t;
      const float2 scale = *reinterpret_cast<const float2*>(page + kPageValueBytes + column * 4);
      const int64_t j = base + g * 8 + 2 * t;
      *reinterpret_cast<float2*>(logits + j) =
          make_float2(j < visible ? out[0] * scale.x : minus_inf, j + 1 < visible ? out[1] * scale.y : minus_inf);
    }
  }
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("indexer_logits: " + message);
}

}  // namespace

void launch_indexer_logits_mma(const IndexerLogitsArgs& args, hipStream_t stream) {
  validate_indexer_logits(args);
  if (args.rows == 0) return;
  require(reinterpret_cast<uintptr_t>(args.q_fp8) % 4 == 0, "q_fp8 must be 4-byte aligned");
  require(reinterpret_cast<uintptr_t>(args.logits) % 8 == 0, "logits must be 8-byte aligned");
  // One page a block while that leaves fewer than kBlocksToFill blocks, then up to 8: each block
  // stages the row's query once, so longer chunks read less of it again.
  const int pages_per_block =
      static_cast<int>(std::clamp<int64_t>(args.rows * args.pages / kBlocksToFill, 1, kMaxPagesPerBlock));
  const int64_t chunks = (args.pages + pages_per_block - 1) / pages_per_block;
  indexer_logits_mma_kernel<<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(args.rows)), kThreads, 0, stream>>>(
      args, pages_per_block);
  DSV4H_LAUNCH_CHECK("indexer_logits_mma_kernel");
}

}  // namespace dsv4h
#endif
