// DeepSeek-V4 sparse attention on tensor cores (spec 3.4, 9.2), NVIDIA: the decode rows (split
// over their keys) and the prefill rows (one block a row). Attention is MQA over the latent: a row's
// 64 (or 128) heads share its keys, K = V = the 512-dim latent, so a row is a [heads x 512] x
// [512 x keys] product, compute-bound once the keys are in shared memory (64 heads: about 224 FLOP
// per fp8 byte read). Tensor cores do it; a scalar fp32 dot product per (head, key) is latency-bound.
//
// Design (mma.sync m16n8k16 bf16 -> fp32 through inline PTX): one block of 8 warps per (query row,
// group of 16, 32, 48 or 64 heads, split of the row's keys), over the split's keys in the row's
// order (the window's columns [0, window length), then the compressed columns [0, extra length)),
// in tiles of 64 keys:
//   1. gather: 4 threads per key copy its 576 data bytes (cp.async, 16 bytes at a time) into a
//      staging buffer while the previous tile is computed, and its 8 scale bytes into a register;
//      at the tile's start each thread dequantises the bytes it copied (kv_fp8::fp8x8_to_bf16x8:
//      fp8 x 2^(byte - 127) is exact in bf16) into the tile's bf16 rows. A key that is no key (-1,
//      or past the split's keys) is a row of zeros, masked below;
//   2. scores: warp (t, d) multiplies the 16 heads of head tile t by the tile's keys over the dims
//      of its slice d: a half (256 dims) where the block has 2 to 4 head tiles, an eighth where it
//      has one (16 heads: all eight warps at work, not two). In chunks of 64 dims each started from
//      zero in the tensor core and added into the running score with one fp32 add (the tensor
//      core's own accumulation need not round to nearest; a chunk's short sum keeps its error to a
//      few ulp of the chunk); the slices meet in shared memory, each half's chunks added in order,
//      then half 0 + half 1 (score_of): the same additions for halves and eighths, the same sum
//      in every warp of a tile;
//   3. online softmax per head, in fp32: every warp of a head tile computes the same running max m
//      and sum l (quad shuffles in a fixed order), the weights p = exp(s - m) and the factor
//      exp(m_old - m) of the accumulators; -inf for masked keys;
//   4. accumulate: warp (t, d) adds P x V into its 16 heads x its slice's dims (128 fp32 registers
//      a thread for a half, 32 for an eighth), V the same bf16 tile read transposed (ldmatrix
//      .trans); an output's products are the same in either. P enters the tensor core as
//      bf16: p = hi + lo, hi = bf16(p), lo = bf16(p - hi), two products, so that the weights carry
//      16 bits (p's error 2^-17 relative) and the output stays within the tolerance classes of the
//      scalar kernel (one bf16 rounding of P alone moves an output by about 2^-10 of its head's
//      norm, a fifth of a bf16 ulp: a CPU emulation then agrees exactly with the reference on 63-77%
//      of the elements, against bf16_rounded_once's 90%; with hi + lo on 99.8%).
//      The price is 3 products where FLOPs count 2: the kernel reaches at most 2/3 of the mma rate.
// A head tile's arithmetic is its own warps' alone, so a head's result does not depend on how many
// heads share its block: the decode launcher picks the group size for parallelism (below).
// Finish: o = acc * (1 / (1 + exp(sink - lse)) / l), lse = m + log l (the sigmoid written so that a
// large sink gives a tiny factor, not inf / inf), a head with no valid key 0 and lse = -FLT_MAX, the
// rope pairs of dims 448..511 de-rotated by the row's position (angles and sin/cos in double:
// positions reach 2^20 radians), bf16 pairs rounded to nearest even.
//
// Decode (launch_sparse_attention): a decode step has few rows (bs 1..256), each of up to
// 128 + 2048 keys, so a block per row would leave most of the card idle at small batches. A row's
// key tiles are split over sparse_attention_row_splits(keys) blocks (one per 128 keys, at most 8;
// split z takes tiles [z T / S, (z + 1) T / S) of the row's T tiles), a function of the row's own
// key count only, so that a row's result is bitwise the same in any batch. The grid has the widest
// possible row's splits (a shorter row's extra splits return at once, after meeting the cluster's
// barriers in the cluster merge). Each split's m, l and unnormalised accumulators are merged in
// split order (M = max m_z, L = sum l_z e^(m_z - M), the same weights on the accumulators: the same
// bits in either merge, so the launcher may pick by batch) by one of two merges:
//   cluster (2 splits, or a grid of one wave): a (row, head group)'s splits are a cluster; each
//     leaves its state in its own shared memory, and after a cluster barrier split z merges its
//     share of the heads (about heads / S), reading every split's state through distributed shared
//     memory. No memory traffic, no waiting on another launch's blocks;
//   scratch (otherwise): each split leaves its state in the caller's scratch ([rows, heads, grid
//     splits, 514] fp32), then counts itself in split_arrivals; the last of a (row, head group) to
//     arrive merges all its heads while the states are in L2, then discards their L2 lines. The
//     count is reset by the last arrival, so every launch finds the counts 0; two launches must
//     therefore not run at once on one device (they run in stream order in the harness and the
//     model). A cluster of 5 one-block-an-SM blocks leaves SMs of each GPC idle, which large
//     grids pay for.
// No second kernel either way. A row with one split finishes from its registers. Head groups: the
// smallest group (most blocks) whose grid still fits one block an SM, else 64 heads (each key tile
// then serves 64 heads; the other group of 128 heads reads the keys again from L2).
// Prefill (launch_sparse_attention_prefill): rows enough to fill the card, one block per (row, up
// to 64 heads: the largest of 64, 48, 32, 16 dividing heads) over all the row's keys, no scratch.
// Shared memory (~203 KB: one block an SM): q 64 x 520 bf16, the key tile 64 x 520 bf16 (rows
// padded by 16 bytes so ldmatrix's 8 rows fall in distinct banks), the scores' halves 2 x 64 x 72
// fp32, the staging buffer 64 x 576 bytes.
//
// AMD (gfx90a): no MFMA path is written yet; kernels/sparse_attention.hip's scalar kernel serves
// both launchers there.
//
// Mutants (issue 30, SPLIT_ARRIVAL_NOT_RESET of the scratch merge's protocol and SPLIT_MERGE_ONE_SHORT
// of both merges) are compiled in only under
// DSV4H_MUTANT_<NAME>; NOOP returns at once (on a condition of the arguments, so that the compiler
// keeps the rest).
#include <atomic>
#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>

#if defined(DSV4H_GPU_NVIDIA)
#include <cooperative_groups.h>
#endif

#include "kv_pool_fp8.h"
#include "sparse_attention.h"

namespace dsv4h {

#if defined(DSV4H_GPU_NVIDIA)
namespace {

constexpr int kThreads = 256;
constexpr int kMaxHeads = 64;  // a block's heads: 4 tiles of 16
constexpr int kKeys = 64;      // keys a tile
constexpr int kDims = 512, kNopeDims = 448;
constexpr int kStride = kDims + 8;  // bf16 a shared row: 1040 bytes
constexpr int kScoreStride = kKeys + 8;
constexpr int kDataBytes = 576;
constexpr int kPartBytes = kDataBytes / 4;  // a thread's share of a key: 9 copies of 16 bytes

struct Shared {
  uint16_t q[kMaxHeads][kStride];
  uint16_t k[kKeys][kStride];
  float s[2][kMaxHeads][kScoreStride];
  uint8_t raw[kKeys][kDataBytes];
  int valid[kKeys];
  int last;  // scratch merge: the block is its (row, head group)'s last split to arrive
};

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void copy_async_16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared_address(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void copy_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

// Every thread of every block of the cluster; the shared memory written before it (release) is
// visible to the cluster's blocks after it (acquire).
__device__ __forceinline__ void cluster_barrier() { cooperative_groups::this_cluster().sync(); }

// Four 8x8 bf16 matrices from shared memory, lane i giving the address of a row of matrix i / 8;
// .trans hands out their transposes.
__device__ __forceinline__ void load_matrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p))
               : "memory");
}
__device__ __forceinline__ void load_matrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
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

// p as bf16 hi + lo (both rounded to nearest even), two values a word.
__device__ __forceinline__ void split_weights(float p0, float p1, uint32_t& hi, uint32_t& lo) {
  hi = pack_bf16x2_rn(p0, p1);
  lo = pack_bf16x2_rn(p0 - __uint_as_float(hi << 16), p1 - __uint_as_float(hi & 0xffff0000u));
}

// A score from its slots (slot q at slot0 + q * stride): dims 0..255's chunks added in order, then
// 256..511's, then the two halves: the same additions whether a half's four chunks are one warp's
// (kSlices 2, a slot a half) or four warps' (kSlices 8, a slot a chunk), so that a head's result
// does not depend on its block's head group.
template <int kSlices>
__device__ __forceinline__ float score_of(const float* slot0, int stride) {
  constexpr int kPerHalf = kSlices / 2;
  float halves[2];
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    halves[h] = slot0[h * kPerHalf * stride];
    #pragma unroll
    for (int q = 1; q < kPerHalf; ++q) halves[h] += slot0[(h * kPerHalf + q) * stride];
  }
  return halves[0] + halves[1];
}

struct ScopeView {
  const uint8_t* cache;
  int64_t tokens_per_page, page_bytes;
};

constexpr int kMaxSplits = 8;           // sparse_attention_row_splits' bound: the largest portable cluster
constexpr int kPartFloats = kDims + 2;  // a split's state per head: accumulators, m, l
static_assert(kMaxHeads * kPartFloats * sizeof(float) <= 2 * sizeof(uint16_t[kMaxHeads][kStride]),
              "a split's state fits over q and the key tile");

// The scratch merge's arrivals of the splits of each (row, head group): row * head groups + group,
// rows x groups at most 2^20 (the launch refuses more); 0 between launches, which every split of a
// row arriving keeps so: the lengths are clamped to their widths, so no row counts more splits than
// the grid has.
constexpr int64_t kArrivalCounts = int64_t{1} << 20;
__device__ unsigned int split_arrivals[kArrivalCounts];

// How a head's accumulators become its outputs (spec 3.4's finish), and its lse.
struct HeadFinish {
  bool empty;  // no valid key: 0 and lse = -FLT_MAX
  float lse;
#if defined(DSV4H_MUTANT_SINK_IN_NUMERATOR)
  float l, e_sink;
#else
  float scale;  // 1 / (1 + exp(sink - lse)) / l: an output is its accumulator times this, one product
#endif
};

__device__ __forceinline__ HeadFinish head_finish(float sink, float m, float l) {
  HeadFinish f;
#if defined(DSV4H_MUTANT_EMPTY_ROW_NAN)
  f.empty = false;
#else
  f.empty = l == 0.f;
#endif
#if defined(DSV4H_MUTANT_SINK_IN_NUMERATOR)
  f.l = l, f.e_sink = 0.f;
#else
  f.scale = 0.f;
#endif
  if (f.empty) {
    f.lse = -FLT_MAX;
    return f;
  }
  f.lse = m + logf(l);
#if defined(DSV4H_MUTANT_SINK_IN_NUMERATOR)
  f.e_sink = expf(sink - m);
#elif defined(DSV4H_MUTANT_SINK_IGNORED)
  (void)sink;
  f.scale = 1.f / l;
#else
  // 1 / (1 + exp(x)), x = sink - lse, without overflow for large x.
  const float x = sink - f.lse;
  const float factor = x > 0.f ? expf(-x) / (1.f + expf(-x)) : 1.f / (1.f + expf(x));
  f.scale = factor / l;
#endif
  return f;
}

// The rope pair (o0, o1) of dims d, d + 1 multiplied by the conjugate of exp(j pos f), in fp64. A
// call, not inlined: the finish has 64 places that may reach it, and their fp64 sincos inlined
// were much of the kernel's code (its instruction fetch stalled the warps).
__device__ __noinline__ float2 derotate(float o0, float o1, int32_t position, double freq) {
  const double angle = static_cast<double>(position) * freq;
  const double c = cos(angle), s = sin(angle);
  return make_float2(static_cast<float>(o0 * c + o1 * s), static_cast<float>(o1 * c - o0 * s));
}

// Output dims d, d + 1 of a head (d even) from their accumulators, as a bf16 pair.
__device__ __forceinline__ uint32_t output_pair(const HeadFinish& f, float o0, float o1, int d, int32_t position,
                                                const SparseAttentionRope& rope) {
  if (f.empty) {
    o0 = o1 = 0.f;
  } else {
#if defined(DSV4H_MUTANT_SINK_IN_NUMERATOR)
    o0 = (o0 + f.e_sink) / (f.l + f.e_sink), o1 = (o1 + f.e_sink) / (f.l + f.e_sink);
#else
    o0 = o0 * f.scale, o1 = o1 * f.scale;
#endif
  }
#if !defined(DSV4H_MUTANT_ROPE_NOT_INVERTED)
  if (d >= kNopeDims) {
    const float2 r = derotate(o0, o1, position, rope.freqs[(d - kNopeDims) / 2]);
    o0 = r.x, o1 = r.y;
  }
#else
  (void)d, (void)position, (void)rope;
#endif
  return pack_bf16x2_rn(o0, o1);
}

// Where the splits' states of one (row, head group) are: in the cluster's blocks' shared memory
// (`part`, the same offset in every block), or in the scratch (stride grid_splits), written by
// blocks of other SMs and read through L2 (ld.cg), never L1.
struct SplitStates {
  bool cluster;
  const float* part;
  int grid_splits;
};

// Heads [h0, h0 + heads) of (row, heads [head0, ...)): the row's `splits` states merged in split
// order (M = max m_z, L = sum l_z e^(m_z - M), the same weights on the accumulators) and finished;
// the same arithmetic from either source. Every thread of the block calls it.
__device__ void merge_splits(const SparseAttentionArgs& a, const SparseAttentionRope& rope, Shared& sh,
                             const SplitStates& states, int64_t row, int64_t head0, int h0, int heads, int splits) {
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  // The scores' buffer (apart from the states): each of this share's heads' m and l of every split,
  // then its weights and finish.
  float* m_s = &sh.s[0][0][0];
  float* l_s = m_s + kMaxHeads * kMaxSplits;
  float* w_s = l_s + kMaxHeads * kMaxSplits;
  HeadFinish* finish_s = reinterpret_cast<HeadFinish*>(w_s + kMaxHeads * kMaxSplits);
  const auto state_of = [&](int h, int z) -> const float* {
    if (states.cluster) return cooperative_groups::this_cluster().map_shared_rank(states.part, z) + (h0 + h) * kPartFloats;
    return a.scratch + ((row * a.heads + head0 + h0 + h) * states.grid_splits + z) * kPartFloats;
  };
  const auto load = [&](const float* p) {
    return states.cluster ? *reinterpret_cast<const float2*>(p) : __ldcg(reinterpret_cast<const float2*>(p));
  };
  for (int i = tid; i < heads * splits; i += kThreads) {
    const int h = i / splits, z = i % splits;
    const float2 ml = load(state_of(h, z) + kDims);
    m_s[h * kMaxSplits + z] = ml.x, l_s[h * kMaxSplits + z] = ml.y;
  }
  sync_block();
  if (tid < heads) {
    const int h = tid;
    float m = -INFINITY;
    for (int z = 0; z < splits; ++z) m = fmaxf(m, m_s[h * kMaxSplits + z]);
    float l = 0.f;
    for (int z = 0; z < splits; ++z) {
      const float mz = m_s[h * kMaxSplits + z];
      // A split without a valid key (m_z = -inf) is skipped (weight 0 marks it below).
      const float w = m == -INFINITY || mz == -INFINITY ? 0.f : expf(mz - m);
      if (w != 0.f) l = fmaf(w, l_s[h * kMaxSplits + z], l);
      w_s[h * kMaxSplits + z] = w;
    }
    const HeadFinish f = head_finish(a.sink[head0 + h0 + h], m, l);
    finish_s[h] = f;
    a.lse[row * a.heads + head0 + h0 + h] = f.lse;
  }
  sync_block();
  // Warp w the heads w, w + 8, ... of the share; lane i the dim pairs i + 32 c, c < 8 (a state's
  // rows of 514 floats are 8-byte aligned). The states are read kSplitChunk splits at a time, a
  // chunk's loads all issued before any is used, and the loops stay rolled (unrolled over every
  // possible split, this code's warps waited for instructions a third of their time: Nsight
  // Compute, bs 1, H100, 2026-12-07). Each output adds its splits in split order, skipping those
  // of weight 0.
  const int32_t position = a.positions[row];
  constexpr int kPairsPerLane = kDims / 2 / 32;
  constexpr int kSplitChunk = 4;
  #pragma unroll 1
  for (int h = warp; h < heads; h += kThreads / 32) {
    float2 acc[kPairsPerLane];
    #pragma unroll
    for (int c = 0; c < kPairsPerLane; ++c) acc[c] = make_float2(0.f, 0.f);
    #pragma unroll 1
    for (int z0 = 0; z0 < splits; z0 += kSplitChunk) {
      float2 v[kSplitChunk][kPairsPerLane];
      #pragma unroll
      for (int dz = 0; dz < kSplitChunk; ++dz) {
        const float* state = state_of(h, z0 + dz < splits ? z0 + dz : z0);
        #pragma unroll
        for (int c = 0; c < kPairsPerLane; ++c) v[dz][c] = load(state + 2 * (lane + 32 * c));
      }
      #pragma unroll
      for (int dz = 0; dz < kSplitChunk; ++dz) {
#if defined(DSV4H_MUTANT_SPLIT_MERGE_ONE_SHORT)
        const float w = z0 + dz < splits - 1 ? w_s[h * kMaxSplits + z0 + dz] : 0.f;
#else
        const float w = z0 + dz < splits ? w_s[h * kMaxSplits + z0 + dz] : 0.f;
#endif
        if (w == 0.f) continue;  // the same for every lane
        #pragma unroll
        for (int c = 0; c < kPairsPerLane; ++c)
          acc[c].x = fmaf(w, v[dz][c].x, acc[c].x), acc[c].y = fmaf(w, v[dz][c].y, acc[c].y);
      }
    }
    const HeadFinish f = finish_s[h];
    uint32_t* out = reinterpret_cast<uint32_t*>(a.out + (row * a.heads + head0 + h0 + h) * kDims);
    #pragma unroll
    for (int c = 0; c < kPairsPerLane; ++c) {
      const int pair = lane + 32 * c;
      out[pair] = output_pair(f, acc[c].x, acc[c].y, 2 * pair, position, rope);
    }
  }
}

// kSplit: blockIdx.x is the split of the row's key tiles (decode); otherwise one block takes all of
// them (prefill). blockIdx.y is the head group, blockIdx.z the row. kSlices: the warps that share a
// head tile, each over 512 / kSlices dims (2 for groups of 32 to 64 heads; 8 for a group of 16).
template <bool kSplit, int kSlices>
__global__ void __launch_bounds__(kThreads, 1)
    sparse_attention_mma(SparseAttentionArgs a, SparseAttentionRope rope, int64_t window_page_bytes,
                         int64_t extra_page_bytes, int block_heads, bool cluster) {
  extern __shared__ __align__(16) uint8_t shared_bytes[];
  Shared& sh = *reinterpret_cast<Shared*>(shared_bytes);
#if defined(DSV4H_MUTANT_NOOP)
  if (a.rows >= 0) return;
#endif
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  constexpr int kTiles = 8 / kSlices;                   // head tiles of 16 a block takes at most
  constexpr int kSliceDims = kDims / kSlices;            // the dims of a warp's slice
  constexpr int kSliceChunks = kSliceDims / 64;          // its chunks of 64 dims (the scores' unit)
  static_assert(kSlices == 2 || kSlices == 8, "a slice is a half or an eighth of the dims");
  const int tile = warp % kTiles, slice = warp / kTiles;  // this warp's head tile and dim slice
  const bool computes = tile * 16 < block_heads;
  // The scores' slots: slot q of head h at scores + (q * kTiles * 16 + h) * kScoreStride, one slot a
  // slice: its chunks' running sum (a half's, for halves; an eighth's chunk, for eighths).
  float* const scores = &sh.s[0][0][0];
  const int split = static_cast<int>(blockIdx.x);
  const int64_t row = blockIdx.z;
  const int64_t head0 = static_cast<int64_t>(blockIdx.y) * block_heads;

  const ScopeView window{a.window.cache, a.window.tokens_per_page, window_page_bytes};
  const ScopeView extra{a.extra.cache, a.extra.tokens_per_page, extra_page_bytes};
  // Lengths past their widths (metadata the launch cannot check without a sync) are clamped: a row
  // counting more splits than its cluster has blocks would read states no block wrote, and the
  // next row's indices.
  const auto clamp_len = [](int64_t len, int64_t width) { return len < 0 ? int64_t{0} : (len > width ? width : len); };
  int64_t window_len = clamp_len(a.window.lengths[row], a.window.width);
  int64_t extra_len = a.extra.cache ? clamp_len(a.extra.lengths[row], a.extra.width) : 0;
#if defined(DSV4H_MUTANT_WINDOW_SHORT)
  window_len = window_len < 127 ? window_len : 127;
#endif
#if defined(DSV4H_MUTANT_C4_ONE_TOO_MANY)
  if (a.extra.cache) extra_len = extra_len + 1 < a.extra.width ? extra_len + 1 : a.extra.width;
#endif
  const int64_t total = window_len + extra_len;
  // This block's keys [begin, end): whole tiles of the row's split (all of them without a split).
  const int64_t tiles = (total + kKeys - 1) / kKeys;
  const int splits = kSplit ? static_cast<int>(sparse_attention_row_splits(total)) : 1;
  if (split >= splits) {
    // A split past this row's own (the grid has the widest row's): no keys, but where the row has
    // splits, its cluster's barriers count this block too.
    if (splits > 1 && cluster) cluster_barrier(), cluster_barrier();
    return;
  }
  const int64_t begin = split * tiles / splits * kKeys;
  const int64_t end = (split + 1) * tiles / splits * kKeys < total ? (split + 1) * tiles / splits * kKeys : total;
#if defined(DSV4H_MUTANT_SCALE_448)
  const float scale = 0.04724555912615341f;  // 448^-0.5
#else
  const float scale = a.scale;
#endif

  // q of the block's heads, copied with the first tile.
  const uint8_t* q_src = reinterpret_cast<const uint8_t*>(a.q + (row * a.heads + head0) * kDims);
  for (int i = tid; i < block_heads * (kDims / 8); i += kThreads)
    copy_async_16(&sh.q[i / (kDims / 8)][i % (kDims / 8) * 8], q_src + i * 16);

  // This thread's key of a tile and its quarter of the key's bytes; the key's page data and scales.
  const int key = tid / 4, quarter = tid % 4;
  const uint8_t* key_data = nullptr;
  uint2 key_scales = make_uint2(0, 0);
  bool key_valid = false;
  // The key's slot in tile `base` (-1: none), read a tile before its copies start, so that the
  // index load's latency hides behind a tile's arithmetic instead of stalling the warp at the copy.
  struct KeySlot {
    int32_t slot;
    bool extra, in_range;
  };
  const auto slot_of = [&](int64_t base) {
    const int64_t v = base + key;
    KeySlot k{-1, false, v < end};
    if (v >= end) {
      // past the split's keys: no key
    } else if (v < window_len) {
      k.slot = a.window.indices[row * a.window.width + v];
    } else {
      k.slot = a.extra.indices[row * a.extra.width + (v - window_len)];
      k.extra = true;
    }
    return k;
  };
  // Starts the copies of a key: its validity, scale bytes and data bytes (the scope chosen by
  // value: a pointer to one of two local views put both in local memory).
  const auto fetch = [&](const KeySlot& k) {
#if defined(DSV4H_MUTANT_MINUS_ONE_UNMASKED)
    key_valid = k.in_range;  // a -1 inside the length: a zero key with score 0
#else
    key_valid = k.in_range && k.slot >= 0;
#endif
    key_data = nullptr;
    if (k.slot < 0) return;
    const int64_t tokens_per_page = k.extra ? extra.tokens_per_page : window.tokens_per_page;
    const int64_t page = k.slot / tokens_per_page, t = k.slot - page * tokens_per_page;
    const uint8_t* base_bytes = (k.extra ? extra.cache : window.cache) + page * (k.extra ? extra.page_bytes : window.page_bytes);
    key_data = base_bytes + t * kDataBytes;
    key_scales = load_read_only(reinterpret_cast<const uint2*>(base_bytes + tokens_per_page * kDataBytes + t * 8));
    #pragma unroll
    for (int c = 0; c < kPartBytes / 16; ++c)
      copy_async_16(&sh.raw[key][quarter * kPartBytes + c * 16], key_data + quarter * kPartBytes + c * 16);
  };
  if (begin < end) fetch(slot_of(begin));
  KeySlot next = slot_of(begin + kKeys);
  copy_async_commit();
  // Accumulators of this warp's 16 heads x its slice's dims: n-tile j (dims slice * kSliceDims +
  // 8 j ..) holds rows lane / 4 (o[j][0..1]) and lane / 4 + 8 (o[j][2..3]), columns 2 (lane % 4) + 0, 1.
  float o[kSliceDims / 8][4];
  #pragma unroll
  for (int j = 0; j < kSliceDims / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // rows lane / 4 and lane / 4 + 8
  const int g = lane / 4, c2 = 2 * (lane % 4);

  for (int64_t base = begin; base < end; base += kKeys) {
    // 1. This thread's copies of the tile have landed: dequantise them into the key tile.
    copy_async_wait_all();
    #pragma unroll
    for (int c = 0; c < kPartBytes / 16; ++c) {
      const int offset = quarter * kPartBytes + c * 16;
      if (offset < kNopeDims) {
        uint4 out0 = make_uint4(0, 0, 0, 0), out1 = out0;
        if (key_data) {
          const uint4 codes = *reinterpret_cast<const uint4*>(&sh.raw[key][offset]);
          const uint32_t scale_bytes = offset < 256 ? key_scales.x : key_scales.y;  // tile offset / 64's byte
          const int e = static_cast<int>((scale_bytes >> (8 * (offset / 64 % 4))) & 0xffu) - 127;
          out0 = kv_fp8::fp8x8_to_bf16x8(make_uint2(codes.x, codes.y), e);
          out1 = kv_fp8::fp8x8_to_bf16x8(make_uint2(codes.z, codes.w), e);
        }
        *reinterpret_cast<uint4*>(&sh.k[key][offset]) = out0;
        *reinterpret_cast<uint4*>(&sh.k[key][offset + 8]) = out1;
      } else {
        const uint4 rope_words = key_data ? *reinterpret_cast<const uint4*>(&sh.raw[key][offset]) : make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(&sh.k[key][kNopeDims + (offset - kNopeDims) / 2]) = rope_words;
      }
    }
    if (quarter == 0) sh.valid[key] = key_valid;
    sync_block();
    // The next tile's copies run while this one is computed.
    if (base + kKeys < end) fetch(next);
    next = slot_of(base + 2 * kKeys);
    copy_async_commit();

    // 2. Scores of this warp's heads over its dim slice, for the tile's 64 keys in two halves of 32.
    if (computes) {
      #pragma unroll
      for (int kh = 0; kh < 2; ++kh) {
        float s[4][4];
        #pragma unroll
        for (int j = 0; j < 4; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
        #pragma unroll
        for (int chunk = 0; chunk < kSliceChunks; ++chunk) {
          float part[4][4];
          #pragma unroll
          for (int j = 0; j < 4; ++j) part[j][0] = part[j][1] = part[j][2] = part[j][3] = 0.f;
          #pragma unroll
          for (int step = 0; step < 4; ++step) {
            const int k0 = slice * kSliceDims + chunk * 64 + step * 16;
            uint32_t qa[4];
            load_matrix_x4(qa, &sh.q[tile * 16 + lane % 16][k0 + lane / 16 * 8]);
            #pragma unroll
            for (int np = 0; np < 2; ++np) {
              uint32_t kb[4];
              load_matrix_x4(kb, &sh.k[kh * 32 + np * 16 + lane % 8 + lane / 16 * 8][k0 + lane / 8 % 2 * 8]);
              mma_bf16(part[2 * np], qa, kb[0], kb[1]);
              mma_bf16(part[2 * np + 1], qa, kb[2], kb[3]);
            }
          }
          #pragma unroll
          for (int j = 0; j < 4; ++j)
            #pragma unroll
            for (int i = 0; i < 4; ++i) s[j][i] += part[j][i];
        }
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int col = kh * 32 + j * 8 + c2;
          float* slot = scores + (slice * kTiles * 16 + tile * 16 + g) * kScoreStride + col;
          *reinterpret_cast<float2*>(slot) = make_float2(s[j][0], s[j][1]);
          *reinterpret_cast<float2*>(slot + 8 * kScoreStride) = make_float2(s[j][2], s[j][3]);
        }
      }
    }
    sync_block();
    if constexpr (kSlices == 8) {
      // The eight slots of each of the 16 x 64 scores added once, into slot 0 (four a thread),
      // rather than by each of the eight warps for every score of its softmax.
      for (int i = tid; i < 16 * kKeys; i += kThreads) {
        float* at = scores + (i / kKeys) * kScoreStride + i % kKeys;
        *at = score_of<kSlices>(at, kTiles * 16 * kScoreStride);
      }
      sync_block();
    }

    if (computes) {
      // 3. Online softmax of rows g, g + 8 over the tile (the same in every warp of the head tile).
      float p[8][4];
      float tile_max[2] = {-INFINITY, -INFINITY};
      #pragma unroll
      for (int j = 0; j < 8; ++j)
        #pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = tile * 16 + g + (i / 2) * 8, col = j * 8 + c2 + i % 2;
          const float* at = scores + r * kScoreStride + col;
          p[j][i] = sh.valid[col] ? (kSlices == 8 ? *at : score_of<kSlices>(at, kTiles * 16 * kScoreStride)) * scale : -INFINITY;
          tile_max[i / 2] = fmaxf(tile_max[i / 2], p[j][i]);
        }
      float alpha[2];
      #pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float m_new = fmaxf(m[r], max_over_lanes(tile_max[r], 4));
        alpha[r] = m_new == -INFINITY ? 1.f : expf(m[r] - m_new);  // 0 while m is -inf
        float sum = 0.f;
        #pragma unroll
        for (int j = 0; j < 8; ++j)
          #pragma unroll
          for (int i = 2 * r; i < 2 * r + 2; ++i) {
            p[j][i] = m_new == -INFINITY ? 0.f : expf(p[j][i] - m_new);
            sum += p[j][i];
          }
        l[r] = l[r] * alpha[r] + sum_over_lanes(sum, 4);
        m[r] = m_new;
      }
      #pragma unroll
      for (int j = 0; j < kSliceDims / 8; ++j) o[j][0] *= alpha[0], o[j][1] *= alpha[0], o[j][2] *= alpha[1], o[j][3] *= alpha[1];
      // 4. o += P V over the tile: P's fragments are the scores' (n-tiles 2 t, 2 t + 1 are k-step t).
      #pragma unroll
      for (int step = 0; step < 4; ++step) {
        uint32_t hi[4], lo[4];
        split_weights(p[2 * step][0], p[2 * step][1], hi[0], lo[0]);
        split_weights(p[2 * step][2], p[2 * step][3], hi[1], lo[1]);
        split_weights(p[2 * step + 1][0], p[2 * step + 1][1], hi[2], lo[2]);
        split_weights(p[2 * step + 1][2], p[2 * step + 1][3], hi[3], lo[3]);
        #pragma unroll
        for (int dp = 0; dp < kSliceDims / 16; ++dp) {
          uint32_t vb[4];
          load_matrix_x4_trans(vb, &sh.k[step * 16 + lane % 8 + lane / 8 % 2 * 8][slice * kSliceDims + dp * 16 + lane / 16 * 8]);
          mma_bf16(o[2 * dp], hi, vb[0], vb[1]);
          mma_bf16(o[2 * dp], lo, vb[0], vb[1]);
          mma_bf16(o[2 * dp + 1], hi, vb[2], vb[3]);
          mma_bf16(o[2 * dp + 1], lo, vb[2], vb[3]);
        }
      }
    }
    sync_block();  // the key tile, the scores and the flags are the next tile's
  }
  copy_async_wait_all();  // q's copies, where the split had no key

  if (kSplit && splits > 1) {
    // This split's state of rows g, g + 8 of its head tile: in the cluster's merge, in its shared
    // memory over q and the key tile (dead since the loop's last barrier, q's copies since the one
    // below); in the scratch merge, in the scratch, which needs no barrier before it.
    float* const part = reinterpret_cast<float*>(shared_bytes);
    if (cluster) sync_block();
    if (computes) {
      #pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int64_t h = tile * 16 + g + 8 * r;
        float* state = cluster ? part + h * kPartFloats : a.scratch + ((row * a.heads + head0 + h) * gridDim.x + split) * kPartFloats;
        #pragma unroll
        for (int j = 0; j < kSliceDims / 8; ++j)
          *reinterpret_cast<float2*>(state + slice * kSliceDims + j * 8 + c2) = make_float2(o[j][2 * r], o[j][2 * r + 1]);
        if (slice == 0 && lane % 4 == 0) state[kDims] = m[r], state[kDims + 1] = l[r];
      }
    }
    if (cluster) {
      // Split z merges heads [z H / S, (z + 1) H / S).
      cluster_barrier();  // every split's state is written
      const int h0 = split * block_heads / splits, h1 = (split + 1) * block_heads / splits;
      merge_splits(a, rope, sh, SplitStates{true, part, 0}, row, head0, h0, h1 - h0, splits);
      cluster_barrier();  // no block leaves while another may read its state
      return;
    }
    sync_block();
    if (tid == 0) {
      // The release: the block's states (ordered before the barrier, which the fence's
      // cumulativity carries) before the count, in the counting thread alone. atomicInc wraps to 0
      // at the last arrival: the next launch finds 0.
      __threadfence();
      const unsigned int last = static_cast<unsigned int>(splits - 1);
#if defined(DSV4H_MUTANT_SPLIT_ARRIVAL_NOT_RESET)
      sh.last = atomicAdd(&split_arrivals[row * gridDim.y + blockIdx.y], 1u) == last;
#else
      sh.last = atomicInc(&split_arrivals[row * gridDim.y + blockIdx.y], last) == last;
#endif
    }
    sync_block();
    if (!sh.last) return;
    __threadfence();
    const SplitStates states{false, nullptr, static_cast<int>(gridDim.x)};
    merge_splits(a, rope, sh, states, row, head0, 0, block_heads, splits);
    // The states are dead once merged: their L2 lines are dropped, not written back to memory (at
    // 64 heads a row's states outweigh its keys: 2 KB a head and split). Only the lines wholly
    // inside this group's states: a neighbouring group's may not be merged yet.
    sync_block();
    const auto state_address = [&](int h) {
      return reinterpret_cast<uintptr_t>(a.scratch + (row * a.heads + head0 + h) * gridDim.x * kPartFloats);
    };
    const uintptr_t begin = state_address(0), end = state_address(block_heads);
    for (uintptr_t line = (begin + 127) / 128 * 128 + tid * 128; line + 128 <= end; line += kThreads * 128)
      asm volatile("discard.global.L2 [%0], 128;" ::"l"(line) : "memory");
    return;
  }
  if (!computes) return;

  // Output of rows g, g + 8, two dims (a rope pair) an n-tile.
  const int32_t position = a.positions[row];
  #pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t head = head0 + tile * 16 + g + 8 * r;
    const HeadFinish f = head_finish(a.sink[head], m[r], l[r]);
    uint32_t* out = reinterpret_cast<uint32_t*>(a.out + (row * a.heads + head) * kDims);
    #pragma unroll
    for (int j = 0; j < kSliceDims / 8; ++j) {
      const int d = slice * kSliceDims + j * 8 + c2;
      out[d / 2] = output_pair(f, o[j][2 * r], o[j][2 * r + 1], d, position, rope);
    }
    if (slice == 0 && lane % 4 == 0) a.lse[row * a.heads + head] = f.lse;
  }
}

// The card's SM count, asked once per device (a driver call; a decode step of a few microseconds is
// launched back to back).
int sm_count() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> counts[kMaxDevices];
  int device = 0;
  DSV4H_HIP_CHECK(hipGetDevice(&device));
  if (device < 0 || device >= kMaxDevices) throw std::invalid_argument("launch_sparse_attention: device id above 63");
  if (counts[device].load() == 0) {
    int sms = 0;
    DSV4H_HIP_CHECK(hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, device));
    counts[device].store(sms);
  }
  return counts[device].load();
}

// The decode grid's head group: the smallest (the most blocks) whose grid still fits one block an
// SM, else the largest dividing heads (64: a key tile then serves 64 heads).
int decode_block_heads(int64_t heads, int64_t rows, int64_t splits, int sms) {
  int largest = 0;
  for (const int b : {16, 32, 48, 64}) {
    if (heads % b) continue;
    if (rows * splits * (heads / b) <= sms) return b;
    largest = b;
  }
  return largest;
}

// The prefill's: the largest of 64, 48, 32, 16 dividing heads.
int prefill_block_heads(int64_t heads) { return heads % 64 == 0 ? 64 : heads % 48 == 0 ? 48 : heads % 32 == 0 ? 32 : 16; }

// With `cluster`, the grid is launched as clusters of its splits (the row's merge reads them through
// distributed shared memory): at most kMaxSplits blocks, the portable cluster size.
template <bool kSplit, int kSlices>
void launch_sliced(const SparseAttentionArgs& a, int64_t splits, int block_heads, bool cluster, hipStream_t stream) {
  const auto kernel = sparse_attention_mma<kSplit, kSlices>;
  const int shared = static_cast<int>(sizeof(Shared));
  DSV4H_HIP_CHECK(hipFuncSetAttribute(kernel, hipFuncAttributeMaxDynamicSharedMemorySize, shared));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(splits), static_cast<unsigned>(a.heads / block_heads), static_cast<unsigned>(a.rows));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = static_cast<size_t>(shared);
  config.stream = stream;
  cudaLaunchAttribute attribute[1] = {};
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = static_cast<unsigned>(splits);
  attribute[0].val.clusterDim.y = attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = cluster ? 1 : 0;
  DSV4H_HIP_CHECK(cudaLaunchKernelEx(&config, kernel, a, sparse_attention_rope(a.compress_ratio),
                                     sparse_attention_page_bytes(a.window.tokens_per_page),
                                     a.extra.cache ? sparse_attention_page_bytes(a.extra.tokens_per_page) : int64_t{0},
                                     block_heads, cluster));
}

// A group of 16 heads is one head tile: its eight warps take an eighth of the dims each (all of
// them at work, 32 accumulators a thread); larger groups' tiles take two warps each, a half each.
template <bool kSplit>
void launch_mma(const SparseAttentionArgs& a, int64_t splits, int block_heads, bool cluster, hipStream_t stream) {
  if (block_heads == 16) {
    launch_sliced<kSplit, 8>(a, splits, block_heads, cluster, stream);
  } else {
    launch_sliced<kSplit, 2>(a, splits, block_heads, cluster, stream);
  }
  if (kSplit) {
    DSV4H_LAUNCH_CHECK("sparse_attention_mma<split>");
  } else {
    DSV4H_LAUNCH_CHECK("sparse_attention_mma");
  }
}

}  // namespace

void launch_sparse_attention(const SparseAttentionArgs& a, hipStream_t stream) {
  const int64_t splits = sparse_attention_splits(a.window.width, a.extra.cache ? a.extra.width : 0);
  if (!sparse_attention_check_launch(a, splits, "launch_sparse_attention")) return;
  const int sms = sm_count(), block_heads = decode_block_heads(a.heads, a.rows, splits, sms);
  const int64_t groups = a.heads / block_heads;
  // The cluster merge where a GPC holds whole clusters (2 splits) or the grid is one wave: a cluster
  // of 5 one-block-an-SM blocks leaves SMs of each GPC idle, and at C4 bs 128 the cluster merge was
  // 18% slower than the scratch merge, though faster at bs 1 and 8 and at every C128 batch (H100,
  // 2026-12-07). Either merge gives the same bits.
  const bool cluster = splits > 1 && (splits <= 2 || a.rows * groups * splits <= sms);
  if (!cluster && a.rows * groups > kArrivalCounts)
    throw std::invalid_argument("launch_sparse_attention: rows * head groups above " + std::to_string(kArrivalCounts));
  launch_mma<true>(a, splits, block_heads, cluster, stream);
}

void launch_sparse_attention_prefill(const SparseAttentionArgs& a, hipStream_t stream) {
  if (!sparse_attention_check_launch(a, 1, "launch_sparse_attention_prefill")) return;
  launch_mma<false>(a, 1, prefill_block_heads(a.heads), false, stream);
}
#endif

}  // namespace dsv4h
