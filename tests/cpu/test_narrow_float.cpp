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
void expect_same_bf16(uint16_t reference_bits, uint16_t harness_bits, float input) {
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
      expect_same_bf16(reference::float_to_bf16(value), float_to_bf16(value), value);
      EXPECT_EQ(reference::float_to_fp8_e4m3(value), float_to_fp8_e4m3(value)) << std::hexfloat << value;
    }
}

TEST(NarrowFloat, EncodesRandomFloatsAlike) {
  std::mt19937 rng(27);
  for (int i = 0; i < 1000000; ++i) {
    const float value = float_of(static_cast<uint32_t>(rng()));
    expect_same_bf16(reference::float_to_bf16(value), float_to_bf16(value), value);
    EXPECT_EQ(reference::float_to_fp8_e4m3(value), float_to_fp8_e4m3(value)) << std::hexfloat << value;
  }
}

}  // namespace
}  // namespace dsv4h
