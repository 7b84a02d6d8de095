// Device-side number formats of the pool kernels (and their slot addressing), written to round exactly as the CPU references
// (reference/kv_cache_model1.cpp, kv_cache_indexer.cpp, harness/dtype.cpp) so that a pack is
// bit-exact: fp8 e4m3fn with round-to-nearest-even (magnitudes rounding above 448 become NaN),
// power-of-two scale exponents computed from the bits (no log2), bf16 with round-to-nearest-even.
// Included only by kernel translation units.
#pragma once

#include <cstdint>

#include "divider.h"
#include "portability.h"

namespace dsv4h::kv_fp8 {

// The smallest e with amax <= 448 * 2^e (amax finite), but at least `floor_e`: MODEL1 uses -13
// (max(amax / 448, 1e-4)), the indexer -22 (max(amax, 1e-4) / 448). With amax = M * 2^E,
// M in [1, 2): 448 * 2^e = 1.75 * 2^(e + 8), so e = E - 8 when M <= 1.75, else E - 7.
// The pool_scale_round_down mutant takes the largest e with 448 * 2^e <= amax instead.
__device__ __forceinline__ int scale_exponent(float amax, int floor_e) {
  if (!(amax >= 0x1p-126f)) return floor_e;  // zero and subnormals sit below every floor
  const uint32_t u = __float_as_uint(amax);
  const int E = static_cast<int>((u >> 23) & 0xffu) - 127;
  const uint32_t m = u & 0x7fffffu;  // M = 1 + m / 2^23; M = 1.75 is m = 0x600000
#if defined(DSV4H_MUTANT_POOL_SCALE_ROUND_DOWN)
  const int e = m >= 0x600000u ? E - 8 : E - 9;
#else
  const int e = m <= 0x600000u ? E - 8 : E - 7;
#endif
  return e > floor_e ? e : floor_e;
}

__device__ __forceinline__ uint8_t fp8_e4m3_rn(float x) {
  const uint32_t u = __float_as_uint(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x43e80000u) return static_cast<uint8_t>(sign | 0x7fu);  // NaN, inf, and above 464 (rounds past 448)
  if (a < 0x3c800000u) {  // below 2^-6: subnormal codes k * 2^-9 (k = 8 is 2^-6, code 0x08, also right)
    const int k = __float2int_rn(__uint_as_float(a) * 512.f);
    return static_cast<uint8_t>(sign | static_cast<uint32_t>(k));
  }
  const uint32_t r = (a + 0x7ffffu + ((a >> 20) & 1u)) >> 20;  // 8-bit exponent and 3-bit mantissa, rounded
  return static_cast<uint8_t>(sign | (r - (120u << 3)));        // exponent bias 127 -> 7
}

__device__ __forceinline__ float fp8_e4m3_to_float(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t exponent = (b >> 3) & 0xfu, mantissa = b & 0x7u;
  if (exponent == 0xfu && mantissa == 0x7u) return __uint_as_float(sign | 0x7fc00000u);
  if (exponent == 0) return __uint_as_float(sign | __float_as_uint(static_cast<float>(mantissa) * 0x1p-9f));
  return __uint_as_float(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

// A slot's page and entry in the page. Slots are below 2^31 (the launch wrappers check), so the
// division by the page's tokens is a multiplication by the launch's magic number (divider.h): a
// division is a chain of 15 or more instructions, on every store's and gather's critical path.
struct SlotPlace {
  uint32_t page, entry;
};
__device__ __forceinline__ SlotPlace place_of(int32_t slot, Divider by_page, uint32_t tokens_per_page) {
  const uint32_t s = static_cast<uint32_t>(slot), page = divide(s, by_page);
  return SlotPlace{page, s - page * tokens_per_page};
}

// 2^e as a float, e in [-126, 127]. x * exp2i(e) is ldexpf(x, e) exactly (both are x * 2^e rounded
// once, to nearest even) at a multiply's cost; the pool's exponents all lie in [-22, 120].
__device__ __forceinline__ float exp2i(int e) { return __uint_as_float(static_cast<uint32_t>(e + 127) << 23); }

__device__ __forceinline__ float bf16_to_float(uint16_t bits) { return __uint_as_float(static_cast<uint32_t>(bits) << 16); }

__device__ __forceinline__ uint16_t float_to_bf16(float value) {
  uint32_t u = __float_as_uint(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// float_to_bf16(ldexpf(fp8_e4m3_to_float(code), e)) for the exponents a store writes (e in
// [-13, 120]), cheaply: an fp8 value has 4 significant bits, so its product with 2^e (at least
// 2^-22, or inf) is a bf16 value and the float's top half is the rounded result. A NaN code gives
// the quiet NaN with the code's sign, as float_to_bf16 makes of it.
__device__ __forceinline__ uint16_t fp8_scaled_to_bf16(uint8_t code, float scale_2e) {
  if ((code & 0x7fu) == 0x7fu) return static_cast<uint16_t>(((code & 0x80u) << 8) | 0x7fc0u);
  return static_cast<uint16_t>(__float_as_uint(fp8_e4m3_to_float(code) * scale_2e) >> 16);
}

// Eight bf16 values times 2^-e as eight fp8 codes (value i in byte i), each exactly
// fp8_e4m3_rn(bf16_to_float(v) * exp2i(-e)). On NVIDIA the common case is the hardware's paired
// conversion (the pack is compute-bound: the software rounding is ~12 instructions a value, the
// conversion one per two); it saturates past 448 where fp8_e4m3_rn gives NaN above 464, so a
// thread whose values reach past 448 * 2^e (inf, NaN, or a scale rounded down) takes the software
// path. On AMD (gfx90a has no fp8 instructions) the software path always.
__device__ __forceinline__ uint2 bf16x8_to_fp8x8(uint4 in, int e) {
  const uint16_t* v = reinterpret_cast<const uint16_t*>(&in);
  const float inverse_scale = exp2i(-e);
  float x[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] = bf16_to_float(v[i]) * inverse_scale;
#if defined(DSV4H_GPU_NVIDIA)
  // Largest magnitude as bits: NaN above inf above every finite value.
  uint32_t top = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) top = max(top, __float_as_uint(x[i]) & 0x7fffffffu);
  if (top <= 0x43e00000u) {  // every |x| <= 448: the hardware rounds exactly as fp8_e4m3_rn
    uint32_t word[2];
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      uint16_t lo, hi;
      asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(x[4 * w + 1]), "f"(x[4 * w]));
      asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(x[4 * w + 3]), "f"(x[4 * w + 2]));
      word[w] = lo | (static_cast<uint32_t>(hi) << 16);
    }
    return make_uint2(word[0], word[1]);
  }
#endif
  uint32_t lo = 0, hi = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    lo |= static_cast<uint32_t>(fp8_e4m3_rn(x[i])) << (8 * i);
    hi |= static_cast<uint32_t>(fp8_e4m3_rn(x[4 + i])) << (8 * i);
  }
  return make_uint2(lo, hi);
}

// Eight fp8 codes (code i in byte i) times 2^e as eight bf16, each exactly
// float_to_bf16(ldexpf(fp8_e4m3_to_float(code), e)). The common case, no NaN code and an exponent a
// store writes, is fp8_scaled_to_bf16; on NVIDIA through the hardware's exact fp8-to-half pair
// conversion (the unpack is compute-bound too). The rare case (a NaN code, or an exponent no store
// writes) is a call: inlined, its per-byte ldexpf paths made up most of the sparse attention
// kernel's code, whose instruction fetch then stalled its warps (Nsight Compute, H100, 2026-12-06).
inline __device__ __noinline__ uint4 fp8x8_to_bf16x8_rare(uint2 codes, int e);
__device__ __forceinline__ uint4 fp8x8_to_bf16x8(uint2 codes, int e) {
  // A byte b has (b & 0x7f) == 0x7f, the NaN codes, exactly when adding 1 to it sets bit 7.
  const bool nan_code = ((((codes.x & 0x7f7f7f7fu) + 0x01010101u) | ((codes.y & 0x7f7f7f7fu) + 0x01010101u)) & 0x80808080u) != 0;
  uint32_t out[4];
  if (!nan_code && e >= -13 && e <= 120) {
    const float scale_2e = exp2i(e);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t pair = (j < 2 ? codes.x : codes.y) >> (16 * (j % 2));
#if defined(DSV4H_GPU_NVIDIA)
      uint32_t halves;
      asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"(static_cast<uint16_t>(pair)));
      float lo, hi;
      asm("cvt.f32.f16 %0, %1;" : "=f"(lo) : "h"(static_cast<uint16_t>(halves)));
      asm("cvt.f32.f16 %0, %1;" : "=f"(hi) : "h"(static_cast<uint16_t>(halves >> 16)));
      lo *= scale_2e, hi *= scale_2e;
      out[j] = __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x7632);  // the top halves
#else
      out[j] = fp8_scaled_to_bf16(static_cast<uint8_t>(pair), scale_2e) |
               (static_cast<uint32_t>(fp8_scaled_to_bf16(static_cast<uint8_t>(pair >> 8), scale_2e)) << 16);
#endif
    }
    return make_uint4(out[0], out[1], out[2], out[3]);
  }
  return fp8x8_to_bf16x8_rare(codes, e);
}
inline __device__ __noinline__ uint4 fp8x8_to_bf16x8_rare(uint2 codes, int e) {
  uint32_t out[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t pair = (j < 2 ? codes.x : codes.y) >> (16 * (j % 2));
    const auto unpack = [&](uint8_t code) -> uint32_t { return float_to_bf16(ldexpf(fp8_e4m3_to_float(code), e)); };
    out[j] = unpack(static_cast<uint8_t>(pair)) | (unpack(static_cast<uint8_t>(pair >> 8)) << 16);
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

}  // namespace dsv4h::kv_fp8
