// The references' narrow float conversions (reference/narrow_float) against the harness's
// (harness/dtype), written apart: each checks the other, exhaustively where the domain is small.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "harness/dtype.h"
#include "reference/narrow_float.h"

namespace dsv4h {
namespace {

float float_of(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// NaNs agree on being NaN and on their sign; the harness keeps a payload the reference drops.
void expect_same_bf16(uint16_t reference_bits, uint16_t harness_bits, double input) {
  if (std::isnan(bf16_to_float(harness_bits))) {
    EXPECT_TRUE(std::isnan(reference::bf16_to_float(reference_bits))) << input;
    EXPECT_EQ(reference_bits & 0x8000, harness_bits & 0x8000) << input;
  } else {
    EXPECT_EQ(reference_bits, harness_bits) << std::hexfloat << input;
  }
}

TEST(NarrowFloat, Fp8DecodesEveryCodeAlike) {
  for (int code = 0; code < 256; ++code) {
    const float expected = fp8_e4m3_to_float(static_cast<uint8_t>(code));
    const float got = reference::fp8_e4m3_to_float(static_cast<uint8_t>(code));
    if (std::isnan(expected)) EXPECT_TRUE(std::isnan(got)) << code;
    else EXPECT_EQ(got, expected) << code;
  }
}

TEST(NarrowFloat, Bf16DecodesEveryPatternAlike) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float expected = bf16_to_float(static_cast<uint16_t>(bits));
    const float got = reference::bf16_to_float(static_cast<uint16_t>(bits));
    EXPECT_EQ(std::memcmp(&got, &expected, 4), 0) << bits;
  }
}

// Every float whose low 16 bits are one of the rounding cases (zero, just below, at and just
// above the halfway point, the largest), over every upper half: ties, carries into the exponent,
// subnormals, the overflow to infinity and NaNs all come up.
TEST(NarrowFloat, EncodesAlikeAroundEveryRoundingPoint) {
  for (uint32_t upper = 0; upper <= 0xffff; ++upper)
    for (uint32_t lower : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      const float value = float_of(upper << 16 | lower);
      expect_same_bf16(reference::double_to_bf16(value), double_to_bf16(value), value);
      EXPECT_EQ(reference::double_to_fp8_e4m3(value), double_to_fp8_e4m3(value)) << std::hexfloat << value;
    }
}

TEST(NarrowFloat, EncodesRandomFloatsAlike) {
  std::mt19937 rng(27);
  for (int i = 0; i < 1000000; ++i) {
    const float value = float_of(static_cast<uint32_t>(rng()));
    expect_same_bf16(reference::double_to_bf16(value), double_to_bf16(value), value);
    EXPECT_EQ(reference::double_to_fp8_e4m3(value), double_to_fp8_e4m3(value)) << std::hexfloat << value;
  }
}

// Doubles between two floats, where a conversion through float would round twice: the two
// conversions, each rounding once from the double, agree.
TEST(NarrowFloat, EncodesRandomDoublesAlike) {
  std::mt19937_64 rng(28);
  std::uniform_real_distribution<double> exponent(-30, 12), unit(-1, 1);
  for (int i = 0; i < 1000000; ++i) {
    const double value = unit(rng) * std::exp2(exponent(rng));
    expect_same_bf16(reference::double_to_bf16(value), double_to_bf16(value), value);
    EXPECT_EQ(reference::double_to_fp8_e4m3(value), double_to_fp8_e4m3(value)) << std::hexfloat << value;
  }
  EXPECT_EQ(bf16_to_float(reference::double_to_bf16(207.4999998)), 207.0f) << "rounded once, not through 207.5f";
}

}  // namespace
}  // namespace dsv4h
