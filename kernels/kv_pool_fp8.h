// Device-side number formats of the pool kernels, written to round exactly as the CPU references
// (reference/kv_cache_model1.cpp, kv_cache_indexer.cpp, harness/dtype.cpp) so that a pack is
// bit-exact: fp8 e4m3fn with round-to-nearest-even (magnitudes rounding above 448 become NaN),
// power-of-two scale exponents computed from the bits (no log2), bf16 with round-to-nearest-even.
// Included only by kernel translation units.
#pragma once

#include <cstdint>

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

__device__ __forceinline__ float bf16_to_float(uint16_t bits) { return __uint_as_float(static_cast<uint32_t>(bits) << 16); }

__device__ __forceinline__ uint16_t float_to_bf16(float value) {
  uint32_t u = __float_as_uint(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace dsv4h::kv_fp8
