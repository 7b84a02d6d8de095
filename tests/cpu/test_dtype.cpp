// Exhaustive checks of the narrow float conversions every comparison and JSON dump depends on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "harness/dtype.h"

namespace dsv4h {
namespace {

TEST(Bf16, EveryPatternRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float f = bf16_to_float(static_cast<uint16_t>(bits));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f)))) << std::hex << bits;
    } else {
      EXPECT_EQ(float_to_bf16(f), bits) << std::hex << bits;
    }
  }
}

TEST(Bf16, RoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even significand (1.0).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 0x1.0p-8f)), 1.0f);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: the even one is 1 + 2^-6.
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3 * 0x1.0p-8f)), 1.0f + 0x1.0p-6f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 0x1.0p-8f + 0x1.0p-20f)), 1.0f + 0x1.0p-7f);
}

TEST(Bf16, UlpMatchesTheSpacing) {
  EXPECT_EQ(bf16_ulp(1.0), 0x1.0p-7);
  EXPECT_EQ(bf16_ulp(-3.0), 0x1.0p-6);
  EXPECT_EQ(bf16_ulp(1.9921875), 0x1.0p-7);
}

TEST(Fp8E4m3, EveryCodeRoundTrips) {
  for (int code = 0; code < 256; ++code) {
    const float f = fp8_e4m3_to_float(static_cast<uint8_t>(code));
    if ((code & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(f)) << code;
      continue;
    }
    EXPECT_EQ(double_to_fp8_e4m3(f), code) << code << " = " << f;
  }
}

TEST(Fp8E4m3, KnownValuesAndRounding) {
  EXPECT_EQ(fp8_e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x01), 0x1.0p-9f);  // smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_float(0x08), 0x1.0p-6f);  // smallest normal
  EXPECT_EQ(double_to_fp8_e4m3(464.0f), 0x7e);     // tie between 448 and 480: even significand
  EXPECT_EQ(double_to_fp8_e4m3(480.0f), 0x7f);     // above the largest finite: NaN, as PyTorch
  EXPECT_EQ(double_to_fp8_e4m3(1.0625f), 0x38);    // tie between 1 and 1.125 goes to 1
  EXPECT_EQ(double_to_fp8_e4m3(1.1875f), 0x3a);    // tie between 1.125 and 1.25 goes to 1.25
  EXPECT_EQ(double_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(double_to_fp8_e4m3(INFINITY), 0x7f);   // no infinity in e4m3fn: NaN, sign kept
  EXPECT_EQ(double_to_fp8_e4m3(-INFINITY), 0xff);
  EXPECT_EQ(double_to_fp8_e4m3(0x1.0p-11f), 0x00); // below half the smallest subnormal
}

// The oracle for rounding once: the codes of a format's non-negative finite values in increasing
// order, plus the first code beyond the largest finite (what an overflow returns), and for a value
// the nearest of its two neighbours by exact distances (long double holds both differences
// exactly), ties to the code with the even significand.
struct Format {
  std::vector<double> values;  // increasing; values.back() is the overflow point (2^128, 480)
  std::vector<uint32_t> codes;
  uint32_t overflow_code;
};

Format positive_codes(uint32_t largest_finite, uint32_t overflow_code, double overflow_value,
                      double (*decode)(uint32_t)) {
  Format f{{}, {}, overflow_code};
  for (uint32_t code = 0; code <= largest_finite; ++code) f.values.push_back(decode(code)), f.codes.push_back(code);
  f.values.push_back(overflow_value);
  f.codes.push_back(overflow_code);
  return f;
}

uint32_t round_once_oracle(const Format& f, double value, uint32_t sign_bit) {
  const double magnitude = std::fabs(value);
  const uint32_t sign = std::signbit(value) ? sign_bit : 0;
  if (magnitude >= f.values.back()) return sign | f.overflow_code;
  const auto above_it = std::upper_bound(f.values.begin(), f.values.end(), magnitude);
  const size_t hi = static_cast<size_t>(above_it - f.values.begin());
  const size_t lo = hi - 1;
  if (f.values[lo] == magnitude) return sign | f.codes[lo];
  const long double below = static_cast<long double>(magnitude) - f.values[lo];
  const long double above = static_cast<long double>(f.values[hi]) - magnitude;
  const bool up = above < below || (above == below && (f.codes[hi] & 1) == 0);
  return sign | f.codes[up ? hi : lo];
}

// Every value of the format, every midpoint between neighbours and the doubles just beside it, and
// random doubles over the whole range (subnormals, overflow, far below the smallest subnormal).
std::vector<double> probes(const Format& f, uint32_t seed) {
  std::vector<double> out;
  for (size_t i = 0; i + 1 < f.values.size(); ++i) {
    const double mid = (f.values[i] + f.values[i + 1]) / 2;
    for (double v : {f.values[i], mid, std::nextafter(mid, 0.0), std::nextafter(mid, INFINITY)}) out.push_back(v);
  }
  std::mt19937_64 rng(seed);
  const int top = std::ilogb(f.values.back()) + 2, bottom = std::ilogb(f.values[1]) - 4;
  std::uniform_int_distribution<int> exponent(bottom, top);
  std::uniform_real_distribution<double> significand(1.0, 2.0);
  for (int i = 0; i < 200000; ++i) out.push_back(std::ldexp(significand(rng), exponent(rng)));
  return out;
}

TEST(Bf16, DoubleRoundsOnceAsTheExactOracle) {
  const Format f = positive_codes(0x7f7f, 0x7f80, 0x1.0p128,
                                  [](uint32_t c) { return double{bf16_to_float(static_cast<uint16_t>(c))}; });
  for (double v : probes(f, 1)) {
    EXPECT_EQ(double_to_bf16(v), round_once_oracle(f, v, 0x8000)) << std::hexfloat << v;
    EXPECT_EQ(double_to_bf16(-v), round_once_oracle(f, -v, 0x8000)) << std::hexfloat << -v;
  }
}

TEST(Bf16, DoubleAgreesWithFloatOnEveryFloatItHolds) {
  for (uint32_t high = 0; high <= 0xffff; ++high)
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xc000u, 0xffffu}) {
      const uint32_t u = high << 16 | low;
      float x;
      std::memcpy(&x, &u, 4);
      if (!std::isnan(x)) {
        EXPECT_EQ(double_to_bf16(x), float_to_bf16(x)) << std::hex << u;
      }
    }
}

// Through float, 207.4999998 became 207.5f and then 208: one rounding gives 207.
TEST(Bf16, DoubleNeverPassesThroughFloat) {
  EXPECT_EQ(bf16_to_float(double_to_bf16(207.4999998)), 207.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(static_cast<float>(207.4999998))), 208.0f);
  EXPECT_EQ(double_to_bf16(1.0 + 0x1.0p-8 + 0x1.0p-40), 0x3f81);  // just above the tie: up
  EXPECT_EQ(double_to_bf16(0x1.0p-134), 0x0000);                    // half the smallest subnormal: even (0)
  EXPECT_EQ(double_to_bf16(0x1.8p-134), 0x0001);
  EXPECT_EQ(double_to_bf16(0x1.ffp127), 0x7f80);                    // rounds beyond the largest finite
  EXPECT_EQ(double_to_bf16(-0.0), 0x8000);
  EXPECT_EQ(double_to_bf16(-INFINITY), 0xff80);
  EXPECT_TRUE(std::isnan(bf16_to_float(double_to_bf16(NAN))));
  EXPECT_EQ(double_to_bf16(1e300), 0x7f80);
  EXPECT_EQ(double_to_bf16(-1e-300), 0x8000);
}

TEST(Fp8E4m3, DoubleRoundsOnceAsTheExactOracle) {
  // 480 is where the codes would go on (0x7f), which e4m3fn spends on NaN.
  const Format f = positive_codes(0x7e, 0x7f, 480.0,
                                  [](uint32_t c) { return double{fp8_e4m3_to_float(static_cast<uint8_t>(c))}; });
  for (double v : probes(f, 2)) {
    EXPECT_EQ(double_to_fp8_e4m3(v), round_once_oracle(f, v, 0x80)) << std::hexfloat << v;
    EXPECT_EQ(double_to_fp8_e4m3(-v), round_once_oracle(f, -v, 0x80)) << std::hexfloat << -v;
  }
  EXPECT_EQ(double_to_fp8_e4m3(1.0625 + 1e-12), 0x39);  // just above a tie that float would erase
  EXPECT_EQ(double_to_fp8_e4m3(NAN), 0x7f);
}

TEST(DtypeUlp, SpacingPerFormat) {
  EXPECT_EQ(dtype_ulp(DType::f32, 1.0), 0x1.0p-23);
  EXPECT_EQ(dtype_ulp(DType::f32, 0x1.0p-140), 0x1.0p-149);
  EXPECT_EQ(dtype_ulp(DType::bf16, -0x1.0p-130), 0x1.0p-133);
  EXPECT_EQ(dtype_ulp(DType::fp8_e4m3, 448.0), 32.0);
  EXPECT_EQ(dtype_ulp(DType::fp8_e4m3, 0.001), 0x1.0p-9);
}

}  // namespace
}  // namespace dsv4h
