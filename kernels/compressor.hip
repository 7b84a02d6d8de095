// DeepSeek-V4's KV compressor step (spec 3.2, 4.3, 9.1): for every token of the step that completes
// a block, the block's entry (softmax pooling per channel with ape, RMSNorm, rope at the block's
// first position, for the indexer key a Hadamard rotation), packed into its pool slot; then the
// ring rows of each request's last min(extend_len, R) tokens.
//
// Design:
// - One block of d threads per entry (grid: the most entries a request can complete in the step,
//   times the requests); thread k owns channel k, so that each candidate row is read by consecutive
//   threads at consecutive addresses, and a thread's chain of fp64 exponentials is as short as the
//   candidates (8 or 128): at 8K tokens a C128 prefill has only 64 entries, and with 128 threads
//   an entry each thread's chain would be four times longer. A position at or
//   after the request's start is read from this step's kv / score rows (S = score + ape, one fp32
//   addition as the state stores it); an earlier one from the request's ring, which holds [kv | S]
//   of its latest R positions. Reading the step's rows directly, rather than writing them into the
//   ring first, lets a prefill entry read each token once and keeps the state write out of the
//   emission's way; the ring rows are written by a second kernel into `ring_out`.
// - The arithmetic is fp64, as the reference's: the pooling (an online softmax), the RMSNorm, the
//   rope angle and its sine and cosine (pos up to 2^24 times a frequency up to 1: fp32 would lose
//   the angle's last bits), the rotation. The result is rounded to bf16 once (round to odd to
//   fp32, then to nearest even, which is exact rounding), so the packed bytes equal the
//   reference's except where an fp64 result lies within its ~1e-15 error of a bf16 rounding
//   midpoint. The cost: a C4 token (d 512) is 8 KB of fp32 read, 2.4 ns at 3.35 TB/s, and 1024
//   channel-candidates of ~30 fp64 operations (the exponential most), 0.9 ns at the H100's 34
//   TFLOP/s of vector fp64: the arithmetic fits under the reads only if it overlaps them well,
//   which the benchmark must show; the fallback is fp32 pooling with an fp64 finish, at the
//   price of the pool check's exactness.
// - The pack (MODEL1: 7 tiles of 64 fp8 with ue8m0 scale bytes, 64 bf16 rope; indexer: 128 fp8
//   and an fp32 power-of-two scale) uses the pool's own conversions (kv_pool_fp8.h), bit-exact with
//   the CPU pack.
// The rope frequencies (YaRN, spec 2.4) are computed on the host in fp64 and passed by value.
//
// Mutants (issue 29): COMPRESSOR_OVERLAP_HALF_MISSING, COMPRESSOR_ABSENT_HALF_ZERO_SCORE,
// COMPRESSOR_ROPE_LAST_POSITION, COMPRESSOR_EMISSION_LATE, COMPRESSOR_CHUNK_STATE_DROPPED; NOOP
// writes nothing.
#include "compressor.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kv_pool_fp8.h"

namespace dsv4h {
namespace {

constexpr int kMaxThreads = 512;  // the emission's block: one thread a channel
constexpr int kThreads = 128;     // the ring rows' block
constexpr int kRopePairs = 32;

struct Params {
  CompressorArgs a;
  double freqs[kRopePairs];
  int width, ring_rows, page_entries;
  int64_t page_bytes;
};

#if defined(DSV4H_MUTANT_COMPRESSOR_EMISSION_LATE)
constexpr int kLate = 1;
#else
constexpr int kLate = 0;
#endif

// This thread's channel of candidate `t` (the half `half` of its rows): S and kv. A position at or
// after the step's start is in this step's rows (S = score + ape, one fp32 addition as the state
// stores it), an earlier one in the request's ring; an absent one (before 0, or past the step's
// tokens, which only the late mutant asks for) has S = -inf.
__device__ __forceinline__ void load_candidate(const Params& p, int b, int start, int n, int t, int half, float& s,
                                               float& v) {
  const CompressorArgs& a = p.a;
  const int k = half * static_cast<int>(a.dims) + static_cast<int>(threadIdx.x);
  bool present = t >= 0 && t < start + n;
#if defined(DSV4H_MUTANT_COMPRESSOR_CHUNK_STATE_DROPPED)
  present = present && !(start % a.ratio != 0 && t < start);
#endif
  if (!present) {
#if defined(DSV4H_MUTANT_COMPRESSOR_ABSENT_HALF_ZERO_SCORE)
    s = t < 0 ? 0.f : -INFINITY, v = 0.f;  // kv 0 with score 0 instead of -inf
#else
    s = -INFINITY, v = 0.f;
#endif
  } else if (t >= start) {
    const int64_t row = static_cast<int64_t>(b) * a.tokens + (t - start);
    v = a.kv[row * p.width + k];
    s = a.score[row * p.width + k] + a.ape[static_cast<int64_t>(t % a.ratio) * p.width + k];
  } else {
    const float* r = a.ring + (static_cast<int64_t>(a.ring_index[b]) * p.ring_rows + t % p.ring_rows) * 2 * p.width;
    v = r[k];
    s = r[p.width + k];
  }
}

// The candidates first .. first + count - 1 into the channel's online softmax (m the running
// maximum, z the sum of exp(S - m), acc the sum of exp(S - m) kv), kChunk at a time: the chunk's
// loads are all issued before the first is used, so that a C128 entry (128 candidates) waits on
// memory 128 / kChunk times rather than 128.
template <int kChunk>
__device__ __forceinline__ void pool_candidates(const Params& p, int b, int start, int n, int first, int count, int half,
                                                double& m, double& z, double& acc) {
  for (int t0 = first; t0 < first + count; t0 += kChunk) {
    float s[kChunk], v[kChunk];
#pragma unroll
    for (int u = 0; u < kChunk; ++u) load_candidate(p, b, start, n, t0 + u, half, s[u], v[u]);
#pragma unroll
    for (int u = 0; u < kChunk; ++u) {
      if (s[u] == -INFINITY) continue;  // absent, or a clean state row: no weight
      const double sd = s[u], vd = v[u];
      if (sd > m) {
        const double scale = exp(m - sd);  // exp(-inf) = 0 for the first candidate
        z = z * scale + 1.0;
        acc = acc * scale + vd;
        m = sd;
      } else {
        const double w = exp(sd - m);
        z += w;
        acc += w * vd;
      }
    }
  }
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

// Launched with d threads: thread k owns channel k.
__global__ void __launch_bounds__(kMaxThreads) compressor_emit(Params p) {
  schedule_point();
#if defined(DSV4H_MUTANT_NOOP)
  if (p.width > 0) return;  // always, unknown to the compiler
#endif
  const CompressorArgs& a = p.a;
  const int b = blockIdx.y;
  const int start = a.start[b], n = a.extend_len[b], ratio = static_cast<int>(a.ratio);
  // Entry j is emitted by the token at ratio j + ratio - 1 (one earlier in the late mutant).
  const int j = (start + kLate) / ratio + static_cast<int>(blockIdx.x);
  const int emitter = ratio * j + ratio - 1 - kLate;
  if (n <= 0 || emitter >= start + n) return;
  const int dims = static_cast<int>(a.dims), tid = threadIdx.x;

  double m = -INFINITY, z = 0, acc = 0;
  if (ratio == 4) {
#if !defined(DSV4H_MUTANT_COMPRESSOR_OVERLAP_HALF_MISSING)
    pool_candidates<4>(p, b, start, n, 4 * j - 4, 4, 0, m, z, acc);  // block j - 1's Ca half
#endif
    pool_candidates<4>(p, b, start, n, 4 * j, 4, 1, m, z, acc);  // block j's Cb half
  } else {
    pool_candidates<16>(p, b, start, n, ratio * j, ratio, 0, m, z, acc);
  }

  __shared__ double values[kMaxThreads];
  __shared__ uint16_t bf16[kMaxThreads];
  __shared__ int exponents[8];
  double y = acc / z;
  values[tid] = y * y;
  sync_block();
  for (int half = dims / 2; half > 0; half /= 2) {
    if (tid < half) values[tid] += values[tid + half];
    sync_block();
  }
  const double rms = sqrt(values[0] / dims + 1e-6);
  sync_block();
  y = y * static_cast<double>(a.norm_weight[tid]) / rms;
  values[tid] = y;
  sync_block();
#if defined(DSV4H_MUTANT_COMPRESSOR_ROPE_LAST_POSITION)
  const double position = static_cast<double>(ratio) * j + ratio - 1;
#else
  const double position = static_cast<double>(ratio) * j;
#endif
  if (tid >= dims - 2 * kRopePairs) {
    const int pair = (tid - (dims - 2 * kRopePairs)) / 2, even = tid & ~1;
    double sine, cosine;
    sincos(position * p.freqs[pair], &sine, &cosine);
    const double re = values[even], im = values[even + 1];
    y = tid == even ? re * cosine - im * sine : re * sine + im * cosine;
  }
  if (dims == 128) {  // hadamard128(y) / sqrt(128), as butterflies in shared memory
    sync_block();
    values[tid] = y;
    for (int h = 1; h < 128; h *= 2) {
      sync_block();
      if (tid < 64) {
        const int i = tid / h * 2 * h + tid % h;
        const double u = values[i], v = values[i + h];
        values[i] = u + v, values[i + h] = u - v;
      }
    }
    sync_block();
    y = values[tid] / sqrt(128.0);
  }
  bf16[tid] = double_to_bf16(y);
  sync_block();

  const int slot = a.out_loc[static_cast<int64_t>(b) * a.tokens + (emitter - start)];
  if (slot < 0 || slot >= a.pool_slots) return;  // the whole block: one entry, no barrier follows unmet
  uint8_t* page = a.pool + static_cast<int64_t>(slot / p.page_entries) * p.page_bytes;
  const int e = slot % p.page_entries;
  if (dims == 512) {
    if (tid < 7) {
      float amax = 0;
      for (int i = 0; i < 64; ++i) amax = fmaxf(amax, fabsf(kv_fp8::bf16_to_float(bf16[64 * tid + i])));
      exponents[tid] = kv_fp8::scale_exponent(amax, -13);
    }
    sync_block();
    uint8_t* data = page + e * 576;
    if (tid < 448) {
      data[tid] = kv_fp8::fp8_e4m3_rn(kv_fp8::bf16_to_float(bf16[tid]) * kv_fp8::exp2i(-exponents[tid / 64]));
    } else {
      data[448 + 2 * (tid - 448)] = static_cast<uint8_t>(bf16[tid]);
      data[448 + 2 * (tid - 448) + 1] = static_cast<uint8_t>(bf16[tid] >> 8);
    }
    if (tid < 8) page[p.page_entries * 576 + e * 8 + tid] = tid < 7 ? static_cast<uint8_t>(exponents[tid] + 127) : 0;
  } else {
    if (tid == 0) {
      float amax = 0;
      for (int i = 0; i < 128; ++i) amax = fmaxf(amax, fabsf(kv_fp8::bf16_to_float(bf16[i])));
      exponents[0] = kv_fp8::scale_exponent(amax, -22);
    }
    sync_block();
    page[e * 128 + tid] = kv_fp8::fp8_e4m3_rn(kv_fp8::bf16_to_float(bf16[tid]) * kv_fp8::exp2i(-exponents[0]));
    if (tid == 0) *reinterpret_cast<float*>(page + p.page_entries * 128 + e * 4) = kv_fp8::exp2i(exponents[0]);
  }
}

// Block (i, b) writes request b's ring row of the step's token i-th from the end, i < min(n, R):
// [kv | score + ape] as the state machine keeps them.
__global__ void __launch_bounds__(kThreads) compressor_ring(Params p) {
  schedule_point();
#if defined(DSV4H_MUTANT_NOOP)
  if (p.width > 0) return;
#endif
  const CompressorArgs& a = p.a;
  const int b = blockIdx.y, i = blockIdx.x;
  const int start = a.start[b], n = a.extend_len[b];
  if (i >= n) return;
  const int t = start + n - 1 - i;
  const int64_t row = static_cast<int64_t>(b) * a.tokens + (t - start);
  float* out = a.ring_out + (static_cast<int64_t>(a.ring_index[b]) * p.ring_rows + t % p.ring_rows) * 2 * p.width;
  const float* ape = a.ape + static_cast<int64_t>(t % a.ratio) * p.width;
  for (int k = threadIdx.x; k < p.width; k += kThreads) {
    out[k] = a.kv[row * p.width + k];
    out[p.width + k] = a.score[row * p.width + k] + ape[k];
  }
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("launch_compressor: " + what);
}

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
  Params p;
  p.a = args;
  yarn_frequencies(p.freqs);
  p.width = static_cast<int>((args.ratio == 4 ? 2 : 1) * args.dims);
  p.ring_rows = args.ratio == 4 ? 8 : 128;
  const CompressorPoolPages pages = compressor_pool_pages(args.ratio, args.dims);
  p.page_entries = static_cast<int>(pages.entries);
  p.page_bytes = pages.bytes;
  // A request completes at most tokens / ratio + 1 blocks in a step (late: one more can start).
  const dim3 emit_grid(static_cast<unsigned>(args.tokens / args.ratio + 1 + kLate), static_cast<unsigned>(args.batch));
  compressor_emit<<<emit_grid, static_cast<unsigned>(args.dims), 0, stream>>>(p);
  DSV4H_LAUNCH_CHECK("compressor_emit");
  const dim3 ring_grid(static_cast<unsigned>(std::min<int64_t>(args.tokens, p.ring_rows)), static_cast<unsigned>(args.batch));
  compressor_ring<<<ring_grid, kThreads, 0, stream>>>(p);
  DSV4H_LAUNCH_CHECK("compressor_ring");
}

}  // namespace dsv4h
