// DeepSeek-V4's KV compressor step (spec 3.2, 4.3, 9.1): for every token of the step that completes
// a block, the block's entry (softmax pooling per channel with ape, RMSNorm, rope at the block's
// first position, for the indexer key a Hadamard rotation), packed into its pool slot; and the
// ring rows of each request's last min(extend_len, R) tokens. One kernel does both (a decode step
// is one launch: a second launch alone costs more than the goal's 1.3x of a dependent-load chain).
//
// Design (why: the version before this one ran at 11-34% of copy bandwidth in prefill and 3.5-61x
// the dependent-load floor in decode: two launches a step, 4-byte loads issued a few at a time, a
// C128 entry's 128 candidates a serial fp64 chain in each thread, fp64 tree reductions with a
// barrier a level, and the pack's tile maxima computed by 7 threads looping over 64 values):
// - One launch a step. Every block first loads its slice of the ring rows (the step's last
//   min(n, R) tokens as [kv | score + ape]; a slice a block, the grid holding at least as many
//   blocks as slices), issues its candidate loads, then stores the slice: the ring row of a decode
//   step costs no memory round trip of its own, nor a block.
// - C4 (ratio 4): 128-thread blocks; an entry is d / 4 threads (128 for d 512, one entry a block;
//   32 for the indexer's d 128, four entries a block), each thread owning 4 consecutive channels,
//   so that every candidate row is read in 16-byte pieces by consecutive threads. A thread issues
//   all 16 loads of its entry (8 candidates, kv and S) before using one: 256 bytes in flight a
//   thread, 32 KB an entry, 128 KB an SM at 4 blocks (104 registers). The softmax is two-pass in
//   registers: the maximum over the 8 scores in fp32 (exact), then one fp64 exponential a
//   candidate, summed in the candidates' order, exactly as reference/compressor.cpp does (max
//   first, then sum and acc in order): the pooled value differs from the reference's only by the
//   two libraries' exp.
// - C128: an entry's 128 tokens are 8 groups of 16, a group 128 threads of 4 channels that load all
//   32 of their rows' pieces at once (512 bytes in flight a thread; 160 registers, 3 blocks and
//   ~190 KB in flight an SM) and pool them two-pass like C4. On NVIDIA a group is a block and an
//   entry's 8 blocks a cluster (sm_90): the entry's 65536 fp64 exponentials run on up to 8 SMs
//   instead of one (one SM's fp64 rate makes them ~13 us alone, the whole of a decode step's budget
//   many times over), and at 8K tokens the 64 entries fill the GPU (512 blocks) where one block an
//   entry would leave half the SMs idle. The groups merge through distributed shared memory: each
//   publishes its maxima, scales its sums by exp(its maximum - the overall one), and block 0 adds
//   the scaled sums in group order. Elsewhere (AMD: no clusters) the 8 groups are one 1024-thread
//   block merging the same way through shared memory, in the same order. The order depends on a
//   candidate's place in the block only, never on whether it comes from the step's rows or the
//   ring, so prefill, chunked prefill and decode stay equal bit for bit.
// - The finish (both ratios) is warp-level but for one barrier: the sum of squares (shuffles in
//   fp64 within 32 lanes, then the 4 partials of a d-512 entry through shared memory); the rope
//   pairs are a thread's own channels (no exchange); the Hadamard rotation of d 128 is butterflies
//   within a thread (h = 1, 2) and by lane shuffles (h = 4 .. 64), the same additions in the same
//   order as before; the pack's tile amax (64 channels = 16 threads) a 16-lane max; each thread
//   stores its 4 fp8 bytes (one 4-byte store) or its 4 rope bf16 (8 bytes).
// - fp64 arithmetic as the reference (the pool is compared exactly): pooling, RMSNorm, the rope
//   angle and rotation; one rounding to bf16 (round to odd to fp32, then to nearest even). The
//   order differs from the reference's only in the C128 merge and the sum of squares (and the
//   libraries' exp and sincos); each such difference is ~1e-16 relative, so a packed byte differs
//   only where an fp64 result lies within that of a bf16 rounding midpoint (about 1e-13 of the
//   elements; the CPU test EmulatedKernelOrderPacksAsTheReference replays this kernel's order
//   against the reference over thousands of entries). From bf16 on the pack is bit-exact.
//
// Bytes and time (H100, ~3.0 TB/s copy): every input byte is read once (a token's Ca and Cb
// halves go to different entries, each read by one block; the ring slices are read a second time,
// from L2, at most R rows), so a prefill moves the descriptor's work count: C4 8 KB a token, C128
// 4 KB. The fp64 work is ~24 fp64 instructions a candidate channel (CUDA's exp is 17 fp64
// operations in PTX, plus the two conversions from fp32, the subtraction and the two sums): C4
// 1024 a token, 65536 x 1024 x 24 over the H100's ~16.7e12 fp64 lane-operations a second =
// ~95 us at 64K tokens against ~182 us of memory; C128 half of both. Both fit under the reads
// when other blocks' loads overlap them, which the A/B against main must show. Expected: >= 0.9 of
// copy at 64K for both ratios and C4 at 8K; C128 at 8K 0.8-0.9 (34 MB: the launch and the
// cluster scheduling weigh). Decode: one launch, a chain of two dependent loads (the request's
// start, then its rows) plus the fp64 pooling of an entry: emit 0 expected within 1.3x the
// floor; C4 emit 1 adds ~0.7 us (4096 exponentials on one SM), C128 emit 1 ~2 us (8192 on each
// of 8 SMs, then the merge); at bs 64-256 with emission the bytes (C128 bs 256: 135 MB, ~45 us)
// bound the step, not the chain, so the goal's 1.3x of a 2 us chain cannot be met there by any
// kernel: its floor is the copy of those bytes. If the fp64 rate shows in prefill, the next step
// is a table-driven exp (2^(k/64) from a 64-entry table and a degree-5 polynomial: ~10 fp64
// operations instead of 17).
// The rope frequencies (YaRN, spec 2.4) are computed on the host in fp64 and passed by value.
//
// Mutants (issue 29): COMPRESSOR_OVERLAP_HALF_MISSING, COMPRESSOR_ABSENT_HALF_ZERO_SCORE,
// COMPRESSOR_ROPE_LAST_POSITION, COMPRESSOR_EMISSION_LATE, COMPRESSOR_CHUNK_STATE_DROPPED; NOOP
// writes nothing.
#include "compressor.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "kv_pool_fp8.h"
#if defined(DSV4H_GPU_NVIDIA)
#include <cooperative_groups.h>
#endif

namespace dsv4h {
namespace {

constexpr int kRopePairs = 32;
constexpr int kLanes = 32;          // the shuffle groups: a warp on NVIDIA, half a wavefront on AMD
constexpr int kC4Threads = 128;     // a C4 block
constexpr int kC128Groups = 8;     // a C128 entry's token groups: 16 tokens, 128 threads each
#if defined(DSV4H_GPU_NVIDIA)
#define DSV4H_COMPRESSOR_CLUSTER 1   // a group a block, an entry's blocks a cluster (sm_90)
constexpr int kC128Threads = 128;
#else
constexpr int kC128Threads = kC128Groups * 128;
#endif

struct Params {
  CompressorArgs a;
  double freqs[kRopePairs];
  int width, page_entries;
  int64_t page_bytes;
};

#if defined(DSV4H_MUTANT_COMPRESSOR_EMISSION_LATE)
constexpr int kLate = 1;
#else
constexpr int kLate = 0;
#endif

// A request's view for the step: its start and tokens, its ring, and (emission) its entries.
struct Request {
  int b, start, n, ring_index;
  const float* ring;  // its R rows of [kv | S]
};

__device__ __forceinline__ Request request_of(const Params& p, int b, int ring_rows) {
  const CompressorArgs& a = p.a;
  const int ring_index = a.ring_index[b];
  return {b, a.start[b], a.extend_len[b], ring_index, a.ring + static_cast<int64_t>(ring_index) * ring_rows * 2 * p.width};
}

__device__ __forceinline__ float4 add4(float4 x, float4 y) { return make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); }
__device__ __forceinline__ float get(const float4& v, int c) { return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w; }

// Candidate t's channels k .. k + 3: S and kv. A position at or after the step's start is in this
// step's rows (S = score + ape, one fp32 addition as the state stores it), an earlier one in the
// request's ring; an absent one (before 0, or past the step's tokens, which only the late mutant
// asks for) has S = -inf and kv 0.
template <int kWidth, int kRingRows, int kRatio>
__device__ __forceinline__ void load_candidate(const Params& p, const Request& r, int t, int k, float4& s, float4& v) {
  const CompressorArgs& a = p.a;
  bool present = t >= 0 && t < r.start + r.n;
#if defined(DSV4H_MUTANT_COMPRESSOR_CHUNK_STATE_DROPPED)
  present = present && !(r.start % kRatio != 0 && t < r.start);
#endif
  if (!present) {
#if defined(DSV4H_MUTANT_COMPRESSOR_ABSENT_HALF_ZERO_SCORE)
    const float absent = t < 0 ? 0.f : -INFINITY;  // kv 0 with score 0 instead of -inf
#else
    const float absent = -INFINITY;
#endif
    s = make_float4(absent, absent, absent, absent), v = make_float4(0.f, 0.f, 0.f, 0.f);
  } else if (t >= r.start) {
    const int64_t row = static_cast<int64_t>(r.b) * a.tokens + (t - r.start);
    v = load_read_only(reinterpret_cast<const float4*>(a.kv + row * kWidth + k));
    s = add4(load_read_only(reinterpret_cast<const float4*>(a.score + row * kWidth + k)),
             load_read_only(reinterpret_cast<const float4*>(a.ape + (t % kRatio) * kWidth + k)));
  } else {
    const float* row = r.ring + (t % kRingRows) * 2 * kWidth;
    v = load_read_only(reinterpret_cast<const float4*>(row + k));
    s = load_read_only(reinterpret_cast<const float4*>(row + kWidth + k));
  }
}

// Four fp64 exponentials in one call that is never inlined: inlined, exp is ~17 fp64 instructions
// of straight-line code a call site, and the C4 entry's 32 calls unrolled into kilobytes of code
// that each warp runs once, its warps stalling on instruction fetch. One body serves every call; the
// values are exp's own, so the pool stays exact. (The C128 group keeps exp inlined: there the shared
// call was slower, reports/gpu/2026-12-07-2a14e94-h100-compressor-exp4-ab.json.)
__device__ __noinline__ double4 exp4(double a, double b, double c, double d) {
  return make_double4(exp(a), exp(b), exp(c), exp(d));
}

__device__ __forceinline__ double get4(const double4& v, int c) { return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w; }

// The softmax exponent of score su against maximum m: su - m exactly (both fp32), and 0 for an
// absent candidate (su = -inf), whose weight the caller drops.
__device__ __forceinline__ double exponent(float su, float m) {
  return su == -INFINITY ? 0.0 : static_cast<double>(su) - static_cast<double>(m);
}

// The fp64 sum over each aligned group of kLanes lanes, as a butterfly; every lane must call it.
__device__ __forceinline__ double shuffle_xor(double value, int offset) {
#if defined(DSV4H_GPU_NVIDIA)
  return __shfl_xor_sync(0xffffffffu, value, offset, kLanes);
#else
  return __shfl_xor(value, offset, kLanes);
#endif
}

__device__ __forceinline__ double sum_over_lanes_f64(double value) {
  for (int offset = kLanes / 2; offset > 0; offset /= 2) value += shuffle_xor(value, offset);
  return value;
}

// x rounded once to bf16, to nearest even: x to fp32 rounding to odd (toward zero, then the last
// bit set where inexact) keeps the sticky information a second rounding needs, so rounding that
// fp32 to bf16 is the exact rounding of x.
__device__ __forceinline__ uint16_t double_to_bf16(double x) {
  float f = static_cast<float>(x);
  if (fabs(static_cast<double>(f)) > fabs(x)) f = __uint_as_float(__float_as_uint(f) - 1u);
  if (static_cast<double>(f) != x) f = __uint_as_float(__float_as_uint(f) | 1u);
  return kv_fp8::float_to_bf16(f);
}

// What the finish needs besides the pooled values, loaded with the candidates rather than after
// them (each would be a memory round trip of its own at the end): the entry's slot and the norm
// weights of the thread's channels.
struct Finish {
  int slot;
  float4 weight;
};

__device__ __forceinline__ Finish load_finish(const Params& p, const Request& r, int emitter, int l) {
  return {p.a.out_loc[static_cast<int64_t>(r.b) * p.a.tokens + (emitter - r.start)],
          load_read_only(reinterpret_cast<const float4*>(p.a.norm_weight) + l)};
}

// The finish of entry j from its pooled channels y (channels 4l .. 4l + 3, l the thread's place in
// the entry), once `sum_of_squares` (over the entry's d channels) is known: RMSNorm, rope at the
// block's first position, for d 128 the rotation, bf16, the pack. Every lane of the entry's
// kLanes-lane groups calls it (shuffles).
template <int kDims>
__device__ __forceinline__ void finish_entry(const Params& p, double (&y)[4], double sum_of_squares, int l, int j,
                                             const Finish& f) {
  const CompressorArgs& a = p.a;
  const double rms = sqrt(sum_of_squares / kDims + 1e-6);
#pragma unroll
  for (int c = 0; c < 4; ++c) y[c] = y[c] * static_cast<double>(get(f.weight, c)) / rms;
#if defined(DSV4H_MUTANT_COMPRESSOR_ROPE_LAST_POSITION)
  const double position = static_cast<double>(a.ratio) * j + a.ratio - 1;
#else
  const double position = static_cast<double>(a.ratio) * j;
#endif
  constexpr int kRopeThread = (kDims - 2 * kRopePairs) / 4;  // the first thread holding rope channels
  if (l >= kRopeThread) {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      double sine, cosine;
      sincos(position * p.freqs[2 * (l - kRopeThread) + q], &sine, &cosine);
      const double re = y[2 * q], im = y[2 * q + 1];
      y[2 * q] = re * cosine - im * sine;
      y[2 * q + 1] = re * sine + im * cosine;
    }
  }
  if (kDims == 128) {  // hadamard128(y) / sqrt(128): butterflies h = 1, 2 in the thread, 4 .. 64 across lanes
#pragma unroll
    for (int h = 1; h < 4; h *= 2)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (!(i & h)) {
          const double u = y[i], v = y[i + h];
          y[i] = u + v, y[i + h] = u - v;
        }
    for (int lanes = 1; lanes < kLanes; lanes *= 2) {
      const bool upper = (l & lanes) != 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const double other = shuffle_xor(y[i], lanes);
        y[i] = upper ? other - y[i] : y[i] + other;  // lower: u + v; upper: u - v, u the lower's
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) y[i] = y[i] / sqrt(128.0);
  }
  // An out_loc outside the pool writes nothing (after the shuffles every lane must join).
  const bool inside = f.slot >= 0 && f.slot < a.pool_slots;
  uint8_t* page = a.pool + static_cast<int64_t>(f.slot / p.page_entries) * p.page_bytes;
  const int e = f.slot % p.page_entries;
  uint16_t h[4];
  float amax = 0;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    h[c] = double_to_bf16(y[c]);
    amax = fmaxf(amax, fabsf(kv_fp8::bf16_to_float(h[c])));
  }
  if (kDims == 512) {
    amax = max_over_lanes(amax, 16);  // the 64-channel tile: 16 threads
    if (!inside) return;
    const int exponent = kv_fp8::scale_exponent(amax, -13);
    uint8_t* data = page + e * 576;
    if (l < 112) {
      const float inverse = kv_fp8::exp2i(-exponent);
      uint32_t word = 0;
#pragma unroll
      for (int c = 0; c < 4; ++c)
        word |= static_cast<uint32_t>(kv_fp8::fp8_e4m3_rn(kv_fp8::bf16_to_float(h[c]) * inverse)) << (8 * c);
      *reinterpret_cast<uint32_t*>(data + 4 * l) = word;
      if (l % 16 == 0) page[p.page_entries * 576 + e * 8 + l / 16] = static_cast<uint8_t>(exponent + 127);
    } else {
      *reinterpret_cast<uint2*>(data + 448 + 8 * (l - 112)) =
          make_uint2(h[0] | (static_cast<uint32_t>(h[1]) << 16), h[2] | (static_cast<uint32_t>(h[3]) << 16));
      if (l == 112) page[p.page_entries * 576 + e * 8 + 7] = 0;
    }
  } else {
    amax = max_over_lanes(amax, kLanes);  // one scale an entry
    if (!inside) return;
    const int exponent = kv_fp8::scale_exponent(amax, -22);
    const float inverse = kv_fp8::exp2i(-exponent);
    uint32_t word = 0;
#pragma unroll
    for (int c = 0; c < 4; ++c)
      word |= static_cast<uint32_t>(kv_fp8::fp8_e4m3_rn(kv_fp8::bf16_to_float(h[c]) * inverse)) << (8 * c);
    *reinterpret_cast<uint32_t*>(page + e * 128 + 4 * l) = word;
    if (l == 0) *reinterpret_cast<float*>(page + p.page_entries * 128 + e * 4) = kv_fp8::exp2i(exponent);
  }
}

// The ring rows of the step's last min(n, R) tokens, in slices of kRows rows, a slice a block (the
// grid has at least as many blocks as slices): [kv | score + ape] as the state machine keeps them.
// The loads are issued with the block's candidate loads and the stores made once those are in
// flight, so that a decode step's ring row costs no memory round trip of its own.
template <int kThreads, int kWidth, int kRingRows, int kRatio>
struct RingSlice {
  static constexpr int kRowVectors = kWidth / 4;  // 16-byte pieces of a kv (or score) row
  static constexpr int kRows = kThreads >= kRowVectors ? kThreads / kRowVectors : 1;
  static constexpr int kPerThread = kRows * kRowVectors / kThreads;
  float4 kv[kPerThread], s[kPerThread];

  // Piece u of this thread: its row i counted from the step's last token (i >= rows: none) and channel k.
  __device__ __forceinline__ static void place(int slice, int u, int& i, int& k) {
    const int q = static_cast<int>(threadIdx.x) + u * kThreads;
    i = kRows * slice + q / kRowVectors, k = 4 * (q % kRowVectors);
  }

  __device__ __forceinline__ void load(const Params& p, const Request& r, int slice) {
    const CompressorArgs& a = p.a;
#pragma unroll
    for (int u = 0; u < kPerThread; ++u) {
      int i, k;
      place(slice, u, i, k);
      if (i >= min(r.n, kRingRows)) continue;
      const int t = r.start + r.n - 1 - i;
      const int64_t row = static_cast<int64_t>(r.b) * a.tokens + (t - r.start);
      kv[u] = load_read_only(reinterpret_cast<const float4*>(a.kv + row * kWidth + k));
      s[u] = add4(load_read_only(reinterpret_cast<const float4*>(a.score + row * kWidth + k)),
                  load_read_only(reinterpret_cast<const float4*>(a.ape + (t % kRatio) * kWidth + k)));
    }
  }

  __device__ __forceinline__ void store(const Params& p, const Request& r, int slice) const {
    const CompressorArgs& a = p.a;
    const int64_t ring = static_cast<int64_t>(r.ring_index) * kRingRows;
#pragma unroll
    for (int u = 0; u < kPerThread; ++u) {
      int i, k;
      place(slice, u, i, k);
      if (i >= min(r.n, kRingRows)) continue;
      const int t = r.start + r.n - 1 - i;
      float* out = a.ring_out + (ring + t % kRingRows) * 2 * kWidth;
      *reinterpret_cast<float4*>(out + k) = kv[u];
      *reinterpret_cast<float4*>(out + kWidth + k) = s[u];
    }
  }
};

// Ratio 4: grid (max(entry blocks, ring slices), batch), kC4Threads threads.
template <int kDims>
__global__ void __launch_bounds__(kC4Threads) compressor_c4(Params p) {
  constexpr int kWidth = 2 * kDims, kEntryThreads = kDims / 4, kRingRows = 8;
  schedule_point();
#if defined(DSV4H_MUTANT_NOOP)
  if (p.width > 0) return;  // always, unknown to the compiler
#endif
  const Request r = request_of(p, blockIdx.y, kRingRows);
  if (r.n <= 0) return;
  RingSlice<kC4Threads, kWidth, kRingRows, 4> ring;
  ring.load(p, r, blockIdx.x);
  const int l = static_cast<int>(threadIdx.x) % kEntryThreads;
  const int x = static_cast<int>(blockIdx.x) * (kC4Threads / kEntryThreads) + threadIdx.x / kEntryThreads;
  // Entry j is emitted by the token at 4 j + 3 (one earlier in the late mutant). For d 512 the
  // whole block has one entry; for d 128 a 32-lane group, which no barrier follows.
  const int j = (r.start + kLate) / 4 + x, emitter = 4 * j + 3 - kLate;
  const bool emits = emitter < r.start + r.n;
  float4 s[8], v[8];
  Finish f;
  if (emits) {
    f = load_finish(p, r, emitter, l);
#pragma unroll
    for (int u = 0; u < 4; ++u) load_candidate<kWidth, kRingRows, 4>(p, r, 4 * j - 4 + u, 4 * l, s[u], v[u]);  // block j-1's Ca
#pragma unroll
    for (int u = 0; u < 4; ++u) load_candidate<kWidth, kRingRows, 4>(p, r, 4 * j + u, kDims + 4 * l, s[4 + u], v[4 + u]);  // block j's Cb
  }
  ring.store(p, r, blockIdx.x);
  if (!emits) return;
#if defined(DSV4H_MUTANT_COMPRESSOR_OVERLAP_HALF_MISSING)
  constexpr int kFirst = 4;  // block j-1's Ca half not mixed in
#else
  constexpr int kFirst = 0;
#endif
  float m[4];
  double z[4] = {}, acc[4] = {};
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    m[c] = -INFINITY;
#pragma unroll
    for (int u = kFirst; u < 8; ++u) m[c] = fmaxf(m[c], get(s[u], c));
  }
#pragma unroll
  for (int u = kFirst; u < 8; ++u) {
    const double4 w = exp4(exponent(s[u].x, m[0]), exponent(s[u].y, m[1]), exponent(s[u].z, m[2]), exponent(s[u].w, m[3]));
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      if (get(s[u], c) == -INFINITY) continue;  // absent, or a clean state row: no weight
      z[c] += get4(w, c);
      acc[c] += get4(w, c) * static_cast<double>(get(v[u], c));
    }
  }
  double y[4];
  double squares = 0;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    y[c] = acc[c] / z[c];
    squares += y[c] * y[c];
  }
  squares = sum_over_lanes_f64(squares);
  if (kDims == 512) {  // four 32-lane groups
    __shared__ double partial[kC4Threads / kLanes];
    if (threadIdx.x % kLanes == 0) partial[threadIdx.x / kLanes] = squares;
    sync_block();
    squares = (partial[0] + partial[1]) + (partial[2] + partial[3]);
  }
  finish_entry<kDims>(p, y, squares, l, j, f);
}

// Ratio 128 (d 512): an entry's kC128Groups token groups, each 128 threads of 4 channels over 16
// tokens; a group a block and the entry's blocks a cluster on NVIDIA (its fp64 work spread over
// several SMs), the groups one block elsewhere. Grid (max(entries x blocks an entry, ring slices),
// batch).
__global__ void
#if defined(DSV4H_COMPRESSOR_CLUSTER)
__cluster_dims__(kC128Groups, 1, 1)
#endif
__launch_bounds__(kC128Threads) compressor_c128(Params p) {
  constexpr int kDims = 512, kWidth = 512, kRingRows = 128, kTokens = 128 / kC128Groups;
  schedule_point();
#if defined(DSV4H_MUTANT_NOOP)
  if (p.width > 0) return;
#endif
  const Request r = request_of(p, blockIdx.y, kRingRows);
  if (r.n <= 0) return;  // the whole cluster: one request
#if defined(DSV4H_COMPRESSOR_CLUSTER)
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const int g = static_cast<int>(cluster.block_rank()), x = blockIdx.x / kC128Groups, l = threadIdx.x;
#else
  const int g = threadIdx.x / 128, x = blockIdx.x, l = threadIdx.x % 128;
#endif
  RingSlice<kC128Threads, kWidth, kRingRows, 128> ring;
  ring.load(p, r, blockIdx.x);
  const int j = (r.start + kLate) / 128 + x, emitter = 128 * j + 127 - kLate;
  const bool emits = emitter < r.start + r.n;  // the whole cluster (block): one entry
  float4 s[kTokens], v[kTokens];
  Finish f;
  if (emits) {
    if (g == 0) f = load_finish(p, r, emitter, l);
#pragma unroll
    for (int u = 0; u < kTokens; ++u) load_candidate<kWidth, kRingRows, 128>(p, r, 128 * j + kTokens * g + u, 4 * l, s[u], v[u]);
  }
  ring.store(p, r, blockIdx.x);
  if (!emits) return;

  // The group's softmax over its 16 tokens: the maximum, then the sums in token order.
  float m[4];
  double z[4], acc[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    m[c] = -INFINITY, z[c] = 0, acc[c] = 0;
#pragma unroll
    for (int u = 0; u < kTokens; ++u) m[c] = fmaxf(m[c], get(s[u], c));
#pragma unroll
    for (int u = 0; u < kTokens; ++u) {
      const float su = get(s[u], c);
      if (su == -INFINITY) continue;  // absent (the mutants' only): no weight
      const double w = exp(static_cast<double>(su) - static_cast<double>(m[c]));
      z[c] += w;
      acc[c] += w * static_cast<double>(get(v[u], c));
    }
  }
  // The merge: every group scales its sums by exp(m - top), top the channel's maximum over the
  // groups; group 0 adds the scaled sums in group order.
  double y[4];
  double squares = 0;
  __shared__ double partial[4];
#if defined(DSV4H_COMPRESSOR_CLUSTER)
  __shared__ float group_m[4][128];
  __shared__ double group_z[4][128], group_acc[4][128];
#pragma unroll
  for (int c = 0; c < 4; ++c) group_m[c][l] = m[c];
  cluster.sync();
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    float top = -INFINITY;
    for (int h = 0; h < kC128Groups; ++h) top = fmaxf(top, cluster.map_shared_rank(&group_m[0][0], h)[c * 128 + l]);
    const double scale = m[c] == -INFINITY ? 0.0 : exp(static_cast<double>(m[c]) - static_cast<double>(top));
    group_z[c][l] = z[c] * scale, group_acc[c][l] = acc[c] * scale;
  }
  cluster.sync();
  if (g == 0) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      double zz = group_z[c][l], aa = group_acc[c][l];
      for (int h = 1; h < kC128Groups; ++h) {
        zz += cluster.map_shared_rank(&group_z[0][0], h)[c * 128 + l];
        aa += cluster.map_shared_rank(&group_acc[0][0], h)[c * 128 + l];
      }
      y[c] = aa / zz;
      squares += y[c] * y[c];
    }
    squares = sum_over_lanes_f64(squares);
    if (threadIdx.x % kLanes == 0) partial[threadIdx.x / kLanes] = squares;
  }
  cluster.sync();  // the other blocks' sums are read (they may leave), and `partial` is written
#else
  // One block: the maxima, then z and acc in turn through one buffer (48 KB of shared memory).
  __shared__ float group_m[kC128Groups][4][128];
  __shared__ double group_sum[kC128Groups][4][128];
#pragma unroll
  for (int c = 0; c < 4; ++c) group_m[g][c][l] = m[c];
  sync_block();
  double scale[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    float top = -INFINITY;
    for (int h = 0; h < kC128Groups; ++h) top = fmaxf(top, group_m[h][c][l]);
    scale[c] = m[c] == -INFINITY ? 0.0 : exp(static_cast<double>(m[c]) - static_cast<double>(top));
  }
  double zz[4];
#pragma unroll
  for (int pass = 0; pass < 2; ++pass) {
#pragma unroll
    for (int c = 0; c < 4; ++c) group_sum[g][c][l] = (pass == 0 ? z[c] : acc[c]) * scale[c];
    sync_block();
    if (g == 0)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        double sum = group_sum[0][c][l];
        for (int h = 1; h < kC128Groups; ++h) sum += group_sum[h][c][l];
        if (pass == 0) zz[c] = sum;
        else y[c] = sum / zz[c], squares += y[c] * y[c];
      }
    sync_block();
  }
  if (g == 0) {
    squares = sum_over_lanes_f64(squares);
    if (threadIdx.x % kLanes == 0) partial[threadIdx.x / kLanes] = squares;
  }
  sync_block();
#endif
  if (g != 0) return;
  squares = (partial[0] + partial[1]) + (partial[2] + partial[3]);
  finish_entry<kDims>(p, y, squares, l, j, f);
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("launch_compressor: " + what);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The YaRN table of compressed layers (spec 2.4): base 1.6e5, factor 16 over an original 65536
// positions, beta_fast 32, beta_slow 1; pairs below the correction range keep their frequency, those
// above are divided by 16, a linear ramp between.
void yarn_frequencies(double (&freqs)[kRopePairs]) {
  const double base = 160000, pi = 3.14159265358979323846;
  const auto correction = [&](double rotations) {
    return 2 * kRopePairs * std::log(65536 / (rotations * 2 * pi)) / (2 * std::log(base));
  };
  const double low = std::fmax(std::floor(correction(32)), 0);
  double high = std::fmin(std::ceil(correction(1)), 2 * kRopePairs - 1);
  if (high == low) high += 0.001;
  for (int i = 0; i < kRopePairs; ++i) {
    const double f = std::pow(base, -2.0 * i / (2 * kRopePairs));
    const double ramp = std::fmin(std::fmax((i - low) / (high - low), 0.0), 1.0);
    freqs[i] = f / 16 * ramp + f * (1 - ramp);
  }
}

}  // namespace

CompressorPoolPages compressor_pool_pages(int64_t ratio, int64_t dims) {
  const int64_t entries = dims == 128 || ratio == 4 ? 64 : 2;
  return {entries, dims == 128 ? entries * 132 : (entries * 584 + 575) / 576 * 576};
}

void launch_compressor(const CompressorArgs& args, hipStream_t stream) {
  require(args.ratio == 4 || args.ratio == 128, "ratio must be 4 or 128, got " + std::to_string(args.ratio));
  require(args.dims == 512 || (args.dims == 128 && args.ratio == 4), "dims must be 512, or 128 with ratio 4");
  require(args.batch >= 1 && args.batch <= 65535, "batch must be in [1, 65535]");
  require(args.tokens >= 1 && args.tokens <= (1 << 24), "tokens must be in [1, 2^24]");
  require(args.pool_slots >= 1 && args.pool_slots < (int64_t{1} << 31), "pool_slots must be in [1, 2^31)");
  require(args.kv && args.score && args.ape && args.norm_weight && args.ring && args.start && args.extend_len &&
              args.ring_index && args.out_loc && args.pool && args.ring_out,
          "null device pointer");
  // 16-byte loads and stores of rows; 8-byte stores into the pool's entries.
  require(aligned16(args.kv) && aligned16(args.score) && aligned16(args.ape) && aligned16(args.norm_weight) &&
              aligned16(args.ring) && aligned16(args.ring_out) && reinterpret_cast<uintptr_t>(args.pool) % 8 == 0,
          "kv, score, ape, norm_weight, ring and ring_out must be 16-byte aligned, pool 8-byte aligned");
  Params p;
  p.a = args;
  yarn_frequencies(p.freqs);
  p.width = static_cast<int>((args.ratio == 4 ? 2 : 1) * args.dims);
  const int ring_rows = args.ratio == 4 ? 8 : 128;
  const CompressorPoolPages pages = compressor_pool_pages(args.ratio, args.dims);
  p.page_entries = static_cast<int>(pages.entries);
  p.page_bytes = pages.bytes;
  // A request completes at most tokens / ratio + 1 blocks in a step (late: one more can start); the
  // grid has a block (C128 on NVIDIA: a cluster) an entry, or four d-128 entries a block, and at
  // least a block a ring slice.
  const int64_t entries = args.tokens / args.ratio + 1 + kLate;
  const int64_t ring_tokens = std::min<int64_t>(args.tokens, ring_rows);
  int64_t blocks;
  if (args.ratio == 128) {
    const int64_t per_entry = kC128Threads == 128 ? kC128Groups : 1, slice_rows = std::max(1, kC128Threads / 128);
    const int64_t slices = (ring_tokens + slice_rows - 1) / slice_rows;
    blocks = std::max(entries * per_entry, (slices + per_entry - 1) / per_entry * per_entry);
  } else {
    const int64_t per_block = kC4Threads / (args.dims / 4), slice_rows = std::max<int64_t>(1, kC4Threads * 4 / p.width);
    blocks = std::max((entries + per_block - 1) / per_block, (ring_tokens + slice_rows - 1) / slice_rows);
  }
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(args.batch));
  if (args.ratio == 128) compressor_c128<<<grid, kC128Threads, 0, stream>>>(p);
  else if (args.dims == 512) compressor_c4<512><<<grid, kC4Threads, 0, stream>>>(p);
  else compressor_c4<128><<<grid, kC4Threads, 0, stream>>>(p);
  DSV4H_LAUNCH_CHECK("compressor");
}

}  // namespace dsv4h
