// The tile of the MoE's tensor-core GEMMs (moe_gate_up_mma.hip, moe_down_mma.hip), NVIDIA only:
// C[r, n] = sum over k of A[r, k] W[n, k] for the rows r of one row tile of one local expert
// (moe_grouping.h) and the columns n of one column tile, bf16 in, fp32 out, with mma.sync
// m16n8k16 through inline PTX. A's rows are gathered (GEMM1: the token's hidden row, GEMM2: the
// row's activation), W is the expert's [N, K] weights: both K-contiguous, so both enter the tensor
// core through plain ldmatrix (A row-major, W as the column-major B).
//
// Pipeline: K in steps of kStepK = 32; each step's A rows and W rows are copied to shared memory
// with cp.async (16 bytes a copy; a row past the tile's rows or a chunk past K is zero-filled, a
// product 0 that leaves every sum as it is) into `Stages` slots, Stages - 1 steps ahead of the
// tensor core. The weights of a tile stream once for all its rows: that is the point of grouping
// the rows.
//
// Summation order, per output element and the same for every tile shape: each step of 32 is
// summed by the tensor core from zero (two mma of k = 16, the second adding onto the first), then
// added to the element's running fp32 sum with one IEEE add (round to nearest), in K order. So an
// element's value depends on its row of A, its row of W and K only, not on the other rows of its
// tile, the tile's size or the batch: batch invariance holds bitwise, and tile_rows may follow the
// batch. Accuracy: the products of bf16 values are exact in fp32, and the running sum is an fp32
// sum of K / 32 terms rounded to nearest, what fp32_accumulated's derivation assumes; the tensor
// core's own sums may truncate instead of rounding (Fasi et al., PeerJ CS 2021: its adds align to
// the largest exponent and truncate), an error of at most a few fp32 ulps of a 32-term chunk, that
// cannot accumulate over K because the chunks restart from zero. Both are far below the bf16
// rounding of the stage that GEMM1 writes and that GEMM2 reads (bf16_rounded_once,
// fp32_over_bf16_stage: a 2^-7 row bound against about 2^-16 here); tests/cpu/test_moe_reference.cpp
// replays this order with each mma's sum truncated toward zero and passes every verify case.
#pragma once

#include <cstdint>

#include "portability.h"

#if defined(DSV4H_GPU_NVIDIA) && (defined(__CUDACC__) || defined(__HIPCC__))
namespace dsv4h {
namespace moe_mma {

constexpr int kStepK = 32;
constexpr int kStride = kStepK + 8;  // bf16 a shared row: 80 bytes, so ldmatrix's 8 rows hit distinct banks

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared, or 16 zero bytes where !valid (src-size 0 reads nothing).
__device__ __forceinline__ void copy_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
}

// Four 8x8 bf16 matrices from shared memory, lane i giving the address of a row of matrix i / 8.
__device__ __forceinline__ void load_matrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p))
               : "memory");
}

// c += a (16x16, row-major fragments) x b (16x8, column-major fragments), bf16 in, fp32 out.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A block of WarpsM x WarpsN warps computing a Rows x Cols tile; warp (wm, wn) owns rows
// [wm Rows / WarpsM, ...) and columns [wn Cols / WarpsN, ...): Mi x Ni fragments of 16 x 8.
template <int Rows, int Cols, int WarpsM, int WarpsN, int Stages>
struct Tile {
  static constexpr int kRows = Rows, kCols = Cols, kStages = Stages;
  static constexpr int kThreads = WarpsM * WarpsN * 32;
  static constexpr int kMi = Rows / WarpsM / 16, kNi = Cols / WarpsN / 8;
  static_assert(kMi >= 1 && kNi >= 2 && kNi % 2 == 0, "a warp takes 16-row fragments, 8-column pairs");

  struct alignas(16) Shared {  // cp.async and ldmatrix take 16-byte aligned rows
    uint16_t a[Stages][Rows][kStride];
    uint16_t w[Stages][Cols][kStride];
    int32_t rows[Rows];              // the tile's row ids, -1 past the group's end
    const uint16_t* a_rows[Rows];    // their rows of A, nullptr past the group's end
  };

  // acc[i][j][0..3]: the fragment (i, j) of the warp's tile, rows lane / 4 and + 8, columns
  // 2 (lane % 4) and + 1 (mma.sync's accumulator layout).
  float acc[kMi][kNi][4];

  // Sums over K. sh.a_rows (set and synced by the caller): the tile's rows of A, w: the weights'
  // first row of the tile (row stride k), n_valid: W rows in the tile (< Cols at N's end).
  __device__ void run(Shared& sh, const uint16_t* w, int64_t k, int n_valid) {
    for (int i = 0; i < kMi; ++i)
      for (int j = 0; j < kNi; ++j)
        for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.f;
    const int steps = static_cast<int>((k + kStepK - 1) / kStepK);
    const auto load = [&](int step) {
      const int slot = step % Stages;
      const int64_t k0 = int64_t{step} * kStepK;
      for (int c = threadIdx.x; c < (Rows + Cols) * 4; c += kThreads) {
        const int r = c / 4, q = c % 4;
        const int64_t kk = k0 + q * 8;
        if (r < Rows) {
          const uint16_t* src = sh.a_rows[r];
          const bool valid = src != nullptr && kk < k;
          copy_async_16(&sh.a[slot][r][q * 8], valid ? src + kk : w, valid);
        } else {
          const int n = r - Rows;
          const bool valid = n < n_valid && kk < k;
          copy_async_16(&sh.w[slot][n][q * 8], valid ? w + n * k + kk : w, valid);
        }
      }
    };
    for (int s = 0; s < Stages - 1; ++s) {
      if (s < steps) load(s);
      copy_async_commit();
    }
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const int row0 = warp / WarpsN * (Rows / WarpsM), col0 = warp % WarpsN * (Cols / WarpsN);
    for (int step = 0; step < steps; ++step) {
      copy_async_wait<Stages - 2>();
      sync_block();  // step's data is in; every warp is done with the slot the next load refills
      if (step + Stages - 1 < steps) load(step + Stages - 1);
      copy_async_commit();
      const int slot = step % Stages;
      float part[kMi][kNi][4];
      for (int i = 0; i < kMi; ++i)
        for (int j = 0; j < kNi; ++j)
          for (int q = 0; q < 4; ++q) part[i][j][q] = 0.f;
      for (int ks = 0; ks < kStepK; ks += 16) {
        uint32_t a[kMi][4], b[kNi][2];
        for (int i = 0; i < kMi; ++i)
          load_matrix_x4(a[i], &sh.a[slot][row0 + i * 16 + lane % 16][ks + lane / 16 * 8]);
        for (int j = 0; j < kNi; j += 2) {
          uint32_t r[4];
          load_matrix_x4(r, &sh.w[slot][col0 + j * 8 + lane / 16 * 8 + lane % 8][ks + lane / 8 % 2 * 8]);
          b[j][0] = r[0];
          b[j][1] = r[1];
          b[j + 1][0] = r[2];
          b[j + 1][1] = r[3];
        }
        for (int i = 0; i < kMi; ++i)
          for (int j = 0; j < kNi; ++j) mma_bf16(part[i][j], a[i], b[j][0], b[j][1]);
      }
      for (int i = 0; i < kMi; ++i)
        for (int j = 0; j < kNi; ++j)
          for (int q = 0; q < 4; ++q) acc[i][j][q] = __fadd_rn(acc[i][j][q], part[i][j][q]);
    }
    copy_async_wait<0>();
  }

  // The tile's row and column of acc[i][j][q].
  __device__ static int row_of(int i, int q) {
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    return warp / WarpsN * (Rows / WarpsM) + i * 16 + lane / 4 + (q / 2) * 8;
  }
  __device__ static int col_of(int j) {
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    return warp % WarpsN * (Cols / WarpsN) + j * 8 + lane % 4 * 2;
  }
};

// The tiles of both GEMMs (moe_gate_up_mma.hip, moe_down_mma.hip; moe_grouping() picks by the batch):
//   decode  16 rows x 32 columns, 2 warps, 8 slots (31 KB, seven blocks an SM): few rows an
//           expert, and the weights' bytes are the cost: many small blocks, each with 14 KB of
//           weights in flight. One token streams 6 experts' weights in 768 blocks (Flash: 128
//           column tiles of an expert's 4096 x 4096 gate_up weights), one wave at seven blocks an
//           SM; with 12 slots (46 KB, four an SM: 1.45 waves) the routed experts of the Flash
//           layer read their weights at 54% of the copy bandwidth at bs 1, and at 72% at bs 64
//           (187 experts, many waves; reports/gpu/2026-12-08-d6cdbd9-h100-flash-ab.json's note).
//   prefill 64 rows x 128 columns, 4 warps of 32 x 64, 3 slots (46 KB): a weight byte serves 64
//           rows, 64 FLOP a byte of weights, beyond the card's ~600 FLOP/byte ratio only together
//           with the L2 reuse of the kernels' grid order.
using DecodeTile = Tile<16, 32, 1, 2, 8>;
using PrefillTile = Tile<64, 128, 2, 2, 3>;

// The row tile `tile` of the grouping: its group (binary search over tile_offsets[0..groups]) and
// its first row's index into rows_sorted; false past the last tile.
__device__ __forceinline__ bool find_tile(const int32_t* tile_offsets, const int32_t* row_offsets, int groups,
                                          int tile, int tile_rows, int* group, int* first, int* count) {
  if (tile >= tile_offsets[groups]) return false;
  int lo = 0, hi = groups - 1;  // the last g with tile_offsets[g] <= tile
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_offsets[mid] <= tile) lo = mid;
    else hi = mid - 1;
  }
  *group = lo;
  *first = row_offsets[lo] + (tile - tile_offsets[lo]) * tile_rows;
  const int end = row_offsets[lo + 1];
  *count = end - *first < tile_rows ? end - *first : tile_rows;
  return true;
}

}  // namespace moe_mma
}  // namespace dsv4h
#endif
