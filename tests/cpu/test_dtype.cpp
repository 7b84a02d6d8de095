// Exhaustive checks of the narrow float conversions every comparison and JSON dump depends on.
#include <gtest/gtest.h>

#include <cmath>

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
    EXPECT_EQ(float_to_fp8_e4m3(f), code) << code << " = " << f;
  }
}

TEST(Fp8E4m3, KnownValuesAndRounding) {
  EXPECT_EQ(fp8_e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x01), 0x1.0p-9f);  // smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_float(0x08), 0x1.0p-6f);  // smallest normal
  EXPECT_EQ(float_to_fp8_e4m3(464.0f), 0x7e);     // tie between 448 and 480: even significand
  EXPECT_EQ(float_to_fp8_e4m3(480.0f), 0x7f);     // above the largest finite: NaN, as PyTorch
  EXPECT_EQ(float_to_fp8_e4m3(1.0625f), 0x38);    // tie between 1 and 1.125 goes to 1
  EXPECT_EQ(float_to_fp8_e4m3(1.1875f), 0x3a);    // tie between 1.125 and 1.25 goes to 1.25
  EXPECT_EQ(float_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(float_to_fp8_e4m3(INFINITY), 0x7f);   // no infinity in e4m3fn: NaN, sign kept
  EXPECT_EQ(float_to_fp8_e4m3(-INFINITY), 0xff);
  EXPECT_EQ(float_to_fp8_e4m3(0x1.0p-11f), 0x00); // below half the smallest subnormal
}

}  // namespace
}  // namespace dsv4h
