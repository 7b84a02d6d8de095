// DeepSeek-V4 sparse attention on AMD (spec 3.4, 9.2), scalar: per query row and head, one softmax
// over the row's window entries and its compressed entries, the head's sink in the denominator,
// K = V = the 512-dim latent read from MODEL1 FP8 pools (spec 4.1), the output's rope slice
// de-rotated. NVIDIA runs kernels/sparse_attention_mma.hip (tensor cores) for decode and prefill
// rows alike; no MFMA path is written for gfx90a yet, so this kernel serves both launchers there.
// The host functions below the kernels (the rope table, the launchers' argument checks) serve both.
//
// Design: one block of 256 threads per (query row, group of 16 heads); heads share the keys, so a
// block reads each key once for its 16 heads (the other groups of the row read it from L2). The
// block walks the row's keys, the window's columns [0, window length) then the compressed
// columns [0, extra length), in chunks of 16, and stops at the row's real lengths, not at the
// padded widths:
//   1. gather: 16 threads per key load its 576 data bytes and scale bytes (into registers while
//      the previous chunk is computed, so that the loads' latency hides behind it), dequantise the
//      448 fp8 dims (value * 2^(scale byte - 127), exact in bf16) and keep the 64 bf16 rope dims, into
//      shared memory as bf16 pairs (rows padded so that a warp's reads avoid bank conflicts); an
//      index of -1 is no key;
//   2. scores: one thread per (head, key), a 512-term fp32 dot product of exact bf16 products (in
//      four partial sums, 64-bit shared reads), times 512^-0.5; -inf for no key;
//   3. online softmax: one thread per head updates the running max m and sum l and turns the
//      chunk's scores into weights exp(s - m) and the old accumulators' factor exp(m_old - m);
//   4. accumulate: each thread owns two dims (a bf16 pair) of all 16 heads' outputs (32 fp32
//      accumulators) and adds weight x value over the chunk's keys.
// Decode rows' keys are split over up to 8 blocks (blockIdx.z, whole chunks each, as many splits
// as sparse_attention_row_splits gives the row: one per 128 keys): each leaves its m, l and
// accumulators in the caller's scratch and a second kernel merges them in split order. The split
// count is a function of the row's own key count, never of the batch size, so that a row's result
// is the same in any batch (the batch-invariance relation compares runs bitwise); the grid has the
// widest possible row's splits and a shorter row's extra splits are empty and skipped by the merge.
// When no row can have more than 128 keys, one split writes the output directly: it is the merge of
// one split bit for bit (weight exp(0) = 1, l * 1 + 0 = l, acc * 1 + 0 = acc, acc never -0);
// prefill rows (launch_sparse_attention_prefill) take that one split for rows of any length.
// At the end o = acc / l * 1 / (1 + exp(sink - lse)), lse = m + log l, with the sigmoid written so
// that a large sink gives a tiny factor, not inf / inf. A row with no valid key (l = 0) writes 0
// and lse = -FLT_MAX (the reference's finite stand-in for log 0). The threads owning the rope dims
// (448..511: one pair each) de-rotate them by the row's position with the layer's rope table
// (spec 2.4, angles and sin/cos in double: positions reach 2^20 radians).
//
// Mutants (issue 30) are compiled in only under DSV4H_MUTANT_<NAME>; NOOP returns at once from both
// kernels (on a condition of the arguments, so that the compiler keeps the rest).
#include "sparse_attention.h"

#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kv_pool_fp8.h"

namespace dsv4h {
namespace {

// Heads come in groups of 16 (both vendors' kernels); a split's state per head in the scratch is
// its 512 accumulators, m and l.
constexpr int kHeadsPerBlock = 16;
constexpr int kDims = 512, kRopePairs = 32;
constexpr int kPartFloats = kDims + 2;

#if defined(DSV4H_GPU_AMD)
constexpr int kThreads = 256;
constexpr int kKeysPerChunk = 16;
constexpr int kNopeDims = 448;
constexpr int kWords = kDims / 2;           // bf16 pairs per key
// Shared row strides in words: a warp's score step reads 16 keys' rows and 2 heads' rows at one
// column, 64 bits at a time; 258 puts the 16 keys in distinct bank pairs, 260 the two heads apart
// (and keeps q's rows 16-byte aligned for its vector stores).
constexpr int kKeyStride = kWords + 2;
constexpr int kQueryStride = kWords + 4;
constexpr int kPartsPerKey = kThreads / kKeysPerChunk;  // 16 threads gather a key, 32 dims each
constexpr int kDataBytes = 576;             // per token in a page's data section

struct ScopeView {
  const uint8_t* cache;
  int64_t tokens_per_page, page_bytes;
};

__device__ __forceinline__ float lo_bf16(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_bf16(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// One thread's share of a key, dims [32 part, 32 part + 32): loaded into registers while the
// previous chunk is computed, stored to shared memory at the start of its own chunk.
struct KeyPart {
  uint4 raw[4];  // 32 fp8 codes in raw[0..1], or 32 bf16 rope values in raw[0..3]
  float scale;   // 2^(tile's scale byte - 127), for fp8 parts
  int32_t slot;  // -1: no key
  bool valid;    // a key inside this split's range that takes part in the softmax
};

__device__ __forceinline__ void load_part(const ScopeView& scope, int32_t slot, int part, KeyPart& kp) {
  kp.slot = slot;
  if (slot < 0) return;
  const int64_t page = slot / scope.tokens_per_page, t = slot - page * scope.tokens_per_page;
  const uint8_t* base = scope.cache + page * scope.page_bytes;
  const uint8_t* data = base + t * kDataBytes;
  if (part * 32 < kNopeDims) {
    const uint8_t scale_byte = base[scope.tokens_per_page * kDataBytes + t * 8 + part / 2];
    kp.scale = kv_fp8::exp2i(static_cast<int>(scale_byte) - 127);
    const uint4* src = reinterpret_cast<const uint4*>(data + part * 32);
    kp.raw[0] = src[0], kp.raw[1] = src[1];
  } else {
    const uint4* src = reinterpret_cast<const uint4*>(data + kNopeDims + (part * 32 - kNopeDims) * 2);
    for (int i = 0; i < 4; ++i) kp.raw[i] = src[i];
  }
}

// The part as 16 words of bf16 pairs: fp8 value * 2^(byte - 127) is exact in bf16.
__device__ __forceinline__ void store_part(const KeyPart& kp, int part, uint32_t* dst) {
  if (kp.slot < 0) {
    for (int w = 0; w < 16; ++w) dst[w] = 0;
  } else if (part * 32 < kNopeDims) {
    const uint32_t* words = reinterpret_cast<const uint32_t*>(kp.raw);
    for (int w = 0; w < 8; ++w)
      for (int b = 0; b < 4; b += 2) {
        const uint32_t lo = kv_fp8::float_to_bf16(kv_fp8::fp8_e4m3_to_float((words[w] >> (8 * b)) & 0xffu) * kp.scale);
        const uint32_t hi = kv_fp8::float_to_bf16(kv_fp8::fp8_e4m3_to_float((words[w] >> (8 * b + 8)) & 0xffu) * kp.scale);
        dst[w * 2 + b / 2] = lo | (hi << 16);
      }
  } else {
    const uint32_t* words = reinterpret_cast<const uint32_t*>(kp.raw);
    for (int w = 0; w < 16; ++w) dst[w] = words[w];
  }
}

// The rope pair a thread owns, if any (dims 2 tid, 2 tid + 1 >= 448), and its rotation.
struct RopePair {
  bool owned;
  double c, s;
};

__device__ __forceinline__ RopePair rope_pair(const SparseAttentionArgs& a, const SparseAttentionRope& rope, int64_t row, int tid) {
  const int pair = tid - kNopeDims / 2;
  if (pair < 0) return RopePair{false, 1.0, 0.0};
  const double angle = static_cast<double>(a.positions[row]) * rope.freqs[pair];
  return RopePair{true, cos(angle), sin(angle)};
}

// Head `head`'s output dims 2 tid, 2 tid + 1 (and, from thread 0, its lse) from its running max m,
// sum l and unnormalised accumulators.
__device__ __forceinline__ void finalize(const SparseAttentionArgs& a, int64_t row, int64_t head, int tid, float m, float l,
                                         float acc0, float acc1, const RopePair& rp) {
  const float sink = a.sink[head];
  float o0, o1, lse;
#if defined(DSV4H_MUTANT_EMPTY_ROW_NAN)
  const bool empty = false;
#else
  const bool empty = l == 0.f;
#endif
  if (empty) {
    o0 = o1 = 0.f;
    lse = -FLT_MAX;
  } else {
    lse = m + logf(l);
#if defined(DSV4H_MUTANT_SINK_IN_NUMERATOR)
    const float e = expf(sink - m);
    o0 = (acc0 + e) / (l + e), o1 = (acc1 + e) / (l + e);
#else
#if defined(DSV4H_MUTANT_SINK_IGNORED)
    (void)sink;
    const float factor = 1.f;
#else
    // 1 / (1 + exp(x)), x = sink - lse, without overflow for large x.
    const float x = sink - lse;
    const float factor = x > 0.f ? expf(-x) / (1.f + expf(-x)) : 1.f / (1.f + expf(x));
#endif
    o0 = acc0 / l * factor, o1 = acc1 / l * factor;
#endif
  }
#if !defined(DSV4H_MUTANT_ROPE_NOT_INVERTED)
  if (rp.owned) {  // multiply by the conjugate of exp(j pos f)
    const float r0 = static_cast<float>(o0 * rp.c + o1 * rp.s), r1 = static_cast<float>(o1 * rp.c - o0 * rp.s);
    o0 = r0, o1 = r1;
  }
#else
  (void)rp;
#endif
  const uint32_t packed =
      static_cast<uint32_t>(kv_fp8::float_to_bf16(o0)) | (static_cast<uint32_t>(kv_fp8::float_to_bf16(o1)) << 16);
  reinterpret_cast<uint32_t*>(a.out + (row * a.heads + head) * kDims)[tid] = packed;
  if (tid == 0) a.lse[row * a.heads + head] = lse;
}

// kPartial: split blockIdx.z of gridDim.z over the row's chunks, its state left in the scratch for
// sparse_attention_combine; otherwise (one split) the output itself.
template <bool kPartial>
__global__ void __launch_bounds__(kThreads)
    sparse_attention_decode(SparseAttentionArgs a, SparseAttentionRope rope, int64_t window_page_bytes, int64_t extra_page_bytes) {
  alignas(16) __shared__ uint32_t q_s[kHeadsPerBlock][kQueryStride];
  alignas(16) __shared__ uint32_t k_s[kKeysPerChunk][kKeyStride];
  __shared__ float p_s[kHeadsPerBlock][kKeysPerChunk];
  __shared__ float alpha_s[kHeadsPerBlock], m_s[kHeadsPerBlock], l_s[kHeadsPerBlock];
  __shared__ int valid_s[kKeysPerChunk];
#if defined(DSV4H_MUTANT_NOOP)
  if (a.rows >= 0) return;
#endif

  const int tid = threadIdx.x;
  const int64_t row = blockIdx.y;
  const int64_t head0 = static_cast<int64_t>(blockIdx.x) * kHeadsPerBlock;

  // q of the block's 16 heads: 16 x 512 bf16, 16 bytes per thread per step.
  const uint4* q_src = reinterpret_cast<const uint4*>(a.q + (row * a.heads + head0) * kDims);
  for (int i = tid; i < kHeadsPerBlock * kWords / 4; i += kThreads)
    *reinterpret_cast<uint4*>(&q_s[i / (kWords / 4)][i % (kWords / 4) * 4]) = q_src[i];
  if (tid < kHeadsPerBlock) m_s[tid] = -INFINITY, l_s[tid] = 0.f;
  __syncthreads();  // a row without keys skips the loop and reads m_s, l_s below

  const ScopeView window{a.window.cache, a.window.tokens_per_page, window_page_bytes};
  const ScopeView extra{a.extra.cache, a.extra.tokens_per_page, extra_page_bytes};
  int64_t window_len = a.window.lengths[row];
  int64_t extra_len = a.extra.cache ? a.extra.lengths[row] : 0;
#if defined(DSV4H_MUTANT_WINDOW_SHORT)
  window_len = window_len < 127 ? window_len : 127;
#endif
#if defined(DSV4H_MUTANT_C4_ONE_TOO_MANY)
  if (a.extra.cache) extra_len = extra_len + 1 < a.extra.width ? extra_len + 1 : a.extra.width;
#endif
  const int64_t total = window_len + extra_len;
  // This split's keys: whole chunks, [begin, end).
  const int64_t chunks = (total + kKeysPerChunk - 1) / kKeysPerChunk;
  // Splits z >= row_splits are empty; one block without a scratch (kPartial false) takes all keys.
  const int64_t row_splits = kPartial ? sparse_attention_row_splits(total) : 1;
  const int64_t chunks_per_split = (chunks + row_splits - 1) / row_splits;
  const int64_t begin = blockIdx.z * chunks_per_split * kKeysPerChunk;
  const int64_t end = begin + chunks_per_split * kKeysPerChunk < total ? begin + chunks_per_split * kKeysPerChunk : total;
#if defined(DSV4H_MUTANT_SCALE_448)
  const float scale = 0.04724555912615341f;  // 448^-0.5
#else
  const float scale = a.scale;
#endif

  float acc[kHeadsPerBlock][2];
  for (int h = 0; h < kHeadsPerBlock; ++h) acc[h][0] = acc[h][1] = 0.f;

  // This thread's part of key `v` of the row: its slot, loaded into registers.
  const int key = tid / kPartsPerKey, part = tid % kPartsPerKey;
  const auto fetch = [&](int64_t v, KeyPart& kp) {
    int32_t slot = -1;
    const ScopeView* scope = &window;
    if (v >= end) {
      // past this split's keys: no key
    } else if (v < window_len) {
      slot = a.window.indices[row * a.window.width + v];
    } else {
      slot = a.extra.indices[row * a.extra.width + (v - window_len)];
      scope = &extra;
    }
#if defined(DSV4H_MUTANT_MINUS_ONE_UNMASKED)
    kp.valid = v < end;  // a -1 inside the length: a zero key with score 0
#else
    kp.valid = v < end && slot >= 0;
#endif
    load_part(*scope, slot, part, kp);
  };
  KeyPart next;
  if (begin < end) fetch(begin + key, next);

  for (int64_t base = begin; base < end; base += kKeysPerChunk) {
    // 1. Store the chunk's keys (loaded during the previous chunk), then load the next chunk's.
    store_part(next, part, &k_s[key][part * 16]);
    if (part == 0) valid_s[key] = next.valid;
    __syncthreads();
    if (base + kKeysPerChunk < end) fetch(base + kKeysPerChunk + key, next);
    // 2. Scores.
    {
      const int h = tid / kKeysPerChunk, key = tid % kKeysPerChunk;
      // Four independent partial sums: a single chain of 512 dependent FMAs would set the pace.
      float dot[4] = {0.f, 0.f, 0.f, 0.f};
      for (int w = 0; w < kWords; w += 2) {
        const uint2 qw = *reinterpret_cast<const uint2*>(&q_s[h][w]);
        const uint2 kw = *reinterpret_cast<const uint2*>(&k_s[key][w]);
        dot[0] = fmaf(lo_bf16(qw.x), lo_bf16(kw.x), dot[0]);
        dot[1] = fmaf(hi_bf16(qw.x), hi_bf16(kw.x), dot[1]);
        dot[2] = fmaf(lo_bf16(qw.y), lo_bf16(kw.y), dot[2]);
        dot[3] = fmaf(hi_bf16(qw.y), hi_bf16(kw.y), dot[3]);
      }
      p_s[h][key] = valid_s[key] ? ((dot[0] + dot[1]) + (dot[2] + dot[3])) * scale : -INFINITY;
    }
    __syncthreads();
    // 3. Online softmax, one thread per head.
    if (tid < kHeadsPerBlock) {
      const int h = tid;
      float chunk_max = -INFINITY;
      for (int k = 0; k < kKeysPerChunk; ++k) chunk_max = fmaxf(chunk_max, p_s[h][k]);
      const float m_old = m_s[h], m_new = fmaxf(m_old, chunk_max);
      float alpha = 1.f, sum = 0.f;
      if (m_new != -INFINITY) {
        alpha = expf(m_old - m_new);  // 0 while m_old is -inf
        for (int k = 0; k < kKeysPerChunk; ++k) {
          const float p = expf(p_s[h][k] - m_new);
          p_s[h][k] = p;
          sum += p;
        }
      } else {
        for (int k = 0; k < kKeysPerChunk; ++k) p_s[h][k] = 0.f;
      }
      alpha_s[h] = alpha;
      m_s[h] = m_new;
      l_s[h] = l_s[h] * alpha + sum;
    }
    __syncthreads();
    // 4. Accumulate: dims 2 tid, 2 tid + 1 of every head.
    for (int h = 0; h < kHeadsPerBlock; ++h) acc[h][0] *= alpha_s[h], acc[h][1] *= alpha_s[h];
    for (int k = 0; k < kKeysPerChunk; ++k) {
      const uint32_t kw = k_s[k][tid];
      const float v0 = lo_bf16(kw), v1 = hi_bf16(kw);
      for (int h = 0; h < kHeadsPerBlock; ++h) {
        const float p = p_s[h][k];
        acc[h][0] = fmaf(p, v0, acc[h][0]);
        acc[h][1] = fmaf(p, v1, acc[h][1]);
      }
    }
    __syncthreads();
  }

  if (kPartial) {  // this split's running max, sum and unnormalised accumulators
    float* part = a.scratch + ((row * a.heads + head0) * gridDim.z + blockIdx.z) * kPartFloats;
    for (int h = 0; h < kHeadsPerBlock; ++h, part += gridDim.z * kPartFloats) {
      part[2 * tid] = acc[h][0];
      part[2 * tid + 1] = acc[h][1];
      if (tid == 0) part[kDims] = m_s[h], part[kDims + 1] = l_s[h];
    }
    return;
  }
  const RopePair rp = rope_pair(a, rope, row, tid);
  for (int h = 0; h < kHeadsPerBlock; ++h) finalize(a, row, head0 + h, tid, m_s[h], l_s[h], acc[h][0], acc[h][1], rp);
}

// The splits of one (row, 16 heads) merged: M = max m_z, L = sum l_z e^(m_z - M), the same weights
// on the accumulators; then written as the single-split kernel writes them.
__global__ void __launch_bounds__(kThreads) sparse_attention_combine(SparseAttentionArgs a, SparseAttentionRope rope, int splits) {
#if defined(DSV4H_MUTANT_NOOP)
  if (a.rows >= 0) return;
#endif
  const int tid = threadIdx.x;
  const int64_t row = blockIdx.y;
  const int64_t head0 = static_cast<int64_t>(blockIdx.x) * kHeadsPerBlock;
  const RopePair rp = rope_pair(a, rope, row, tid);
  for (int h = 0; h < kHeadsPerBlock; ++h) {
    const float* part = a.scratch + (row * a.heads + head0 + h) * splits * kPartFloats;
    float m = -INFINITY;
    for (int z = 0; z < splits; ++z) m = fmaxf(m, part[z * kPartFloats + kDims]);
    float l = 0.f, acc0 = 0.f, acc1 = 0.f;
    if (m != -INFINITY)
      for (int z = 0; z < splits; ++z) {
        const float* pz = part + z * kPartFloats;
        if (pz[kDims] == -INFINITY) continue;  // a split without keys, e.g. past the row's own splits
        const float w = expf(pz[kDims] - m);
        l = fmaf(w, pz[kDims + 1], l);
        acc0 = fmaf(w, pz[2 * tid], acc0);
        acc1 = fmaf(w, pz[2 * tid + 1], acc1);
      }
    finalize(a, row, head0 + h, tid, m, l, acc0, acc1, rp);
  }
}

#endif
}  // namespace

// Spec 2.4's table: f_i = base^(-2i/64); ratio-4/128 layers base 1.6e5 with frequency-only YaRN
// (original context 65536, factor 16, beta_fast 32, beta_slow 1), ratio-0 layers base 1e4.
SparseAttentionRope sparse_attention_rope(int64_t compress_ratio) {
  const double pi = 3.14159265358979323846, base = compress_ratio == 0 ? 10000 : 160000;
  SparseAttentionRope t;
  for (int i = 0; i < kRopePairs; ++i) t.freqs[i] = std::pow(base, -2.0 * i / 64);
  if (compress_ratio == 0) return t;
  const auto dim_of = [&](double rotations) { return 64 * std::log(65536 / (rotations * 2 * pi)) / (2 * std::log(base)); };
  const double low = std::fmax(std::floor(dim_of(32)), 0.0);
  double high = std::fmin(std::ceil(dim_of(1)), 63.0);
  if (high == low) high += 0.001;
  for (int i = 0; i < kRopePairs; ++i) {
    const double ramp = std::fmin(std::fmax((i - low) / (high - low), 0.0), 1.0);
    t.freqs[i] = t.freqs[i] / 16 * ramp + t.freqs[i] * (1 - ramp);
  }
  return t;
}

bool sparse_attention_check_launch(const SparseAttentionArgs& a, int64_t splits, const char* launcher) {
  const auto bad = [&](const std::string& why) { return std::invalid_argument(std::string(launcher) + ": " + why); };
  if (a.rows < 0 || a.rows > 65535) throw bad("rows must be in [0, 65535]");
  if (a.heads <= 0 || a.heads % kHeadsPerBlock || a.heads > 1024) throw bad("heads must be a positive multiple of 16");
  if (a.compress_ratio != 0 && a.compress_ratio != 4 && a.compress_ratio != 128) throw bad("compress_ratio must be 0, 4 or 128");
  if (!a.window.cache || a.window.tokens_per_page <= 0 || a.window.width <= 0) throw bad("window: cache, tokens_per_page and width needed");
  if (a.extra.cache && (a.extra.tokens_per_page <= 0 || a.extra.width <= 0)) throw bad("extra: tokens_per_page and width needed");
  if (a.rows == 0) return false;
  if (splits > 1 && (!a.scratch || a.scratch_floats < a.rows * a.heads * splits * kPartFloats))
    throw bad("scratch must hold rows * heads * " + std::to_string(splits) + " splits * 514 floats");
  if (!a.q || !a.sink || !a.positions || !a.out || !a.lse || !a.window.indices || !a.window.lengths ||
      (a.extra.cache && (!a.extra.indices || !a.extra.lengths)))
    throw bad("null device pointer");
  return true;
}

#if defined(DSV4H_GPU_AMD)
namespace {
dim3 grid_of(const SparseAttentionArgs& a) {
  return dim3(static_cast<unsigned>(a.heads / kHeadsPerBlock), static_cast<unsigned>(a.rows));
}

// One block per (row, 16 heads) over all the row's keys, whatever their count: no scratch.
void launch_unsplit(const SparseAttentionArgs& a, hipStream_t stream) {
  sparse_attention_decode<false><<<grid_of(a), kThreads, 0, stream>>>(
      a, sparse_attention_rope(a.compress_ratio), sparse_attention_page_bytes(a.window.tokens_per_page),
      a.extra.cache ? sparse_attention_page_bytes(a.extra.tokens_per_page) : 0);
  DSV4H_LAUNCH_CHECK("sparse_attention_decode");
}
}  // namespace

void launch_sparse_attention(const SparseAttentionArgs& a, hipStream_t stream) {
  const int64_t splits = sparse_attention_splits(a.window.width, a.extra.cache ? a.extra.width : 0);
  if (!sparse_attention_check_launch(a, splits, "launch_sparse_attention")) return;
  if (splits == 1) {
    launch_unsplit(a, stream);
    return;
  }
  const SparseAttentionRope rope = sparse_attention_rope(a.compress_ratio);
  const int64_t window_bytes = sparse_attention_page_bytes(a.window.tokens_per_page);
  const int64_t extra_bytes = a.extra.cache ? sparse_attention_page_bytes(a.extra.tokens_per_page) : 0;
  const dim3 grid = grid_of(a), split_grid(grid.x, grid.y, static_cast<unsigned>(splits));
  sparse_attention_decode<true><<<split_grid, kThreads, 0, stream>>>(a, rope, window_bytes, extra_bytes);
  DSV4H_LAUNCH_CHECK("sparse_attention_decode<partial>");
  sparse_attention_combine<<<grid, kThreads, 0, stream>>>(a, rope, static_cast<int>(splits));
  DSV4H_LAUNCH_CHECK("sparse_attention_combine");
}

void launch_sparse_attention_prefill(const SparseAttentionArgs& a, hipStream_t stream) {
  if (!sparse_attention_check_launch(a, 1, "launch_sparse_attention_prefill")) return;
  launch_unsplit(a, stream);
}
#endif

}  // namespace dsv4h
