// The MODEL1 FP8 cache layout reference (spec 4.1): page sizes, byte positions, the scale rule, and
// every fp8 code at every scale exponent that can occur, packed and unpacked exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/dtype.h"
#include "harness/random.h"
#include "reference/kv_cache_model1.h"

namespace dsv4h::reference {
namespace {

TEST(KvCacheModel1, PageBytesAsInTheSpec) {
  EXPECT_EQ(model1_page_bytes(256), 149760);
  EXPECT_EQ(model1_page_bytes(128), 74880);
  EXPECT_EQ(model1_page_bytes(64), 37440);
  EXPECT_EQ(model1_page_bytes(2), 1728);
}

TEST(KvCacheModel1, ScaleIsTheSmallestPowerOfTwoThatFits) {
  EXPECT_EQ(model1_scale_exponent(448.f), 0);
  EXPECT_EQ(model1_scale_exponent(std::nextafter(448.f, 1e9f)), 1);
  EXPECT_EQ(model1_scale_exponent(896.f), 1);
  EXPECT_EQ(model1_scale_exponent(224.f), -1);
  EXPECT_EQ(model1_scale_exponent(0.f), -13);   // amax / 448 raised to 1e-4 = 2^-13.3
  EXPECT_EQ(model1_scale_exponent(448.f * 0x1p-20f), -13);
}

// A latent whose tile `tile` holds 448 * 2^e (which fixes the scale at 2^e) and `value` * 2^e.
std::vector<uint16_t> latent_with(int tile, int e, float value) {
  std::vector<uint16_t> latent(kModel1Dims, float_to_bf16(0.f));
  latent[tile * kModel1TileDims] = float_to_bf16(std::ldexp(448.f, e));
  latent[tile * kModel1TileDims + 1 + (tile % 5)] = float_to_bf16(std::ldexp(value, e));
  for (int d = kModel1NopeDims; d < kModel1Dims; ++d) latent[d] = static_cast<uint16_t>(0x3f80 + d);
  return latent;
}

TEST(KvCacheModel1, EveryFp8CodeAtEveryScaleExponentRoundTripsExactly) {
  constexpr int64_t kTokens = 2;
  std::vector<uint8_t> page(model1_page_bytes(kTokens));
  // From the 1e-4 floor (2^-13) to the largest amax bf16 can hold (448 * 2^119 < 2^128).
  for (int e = -13; e <= 119; ++e)
    for (int code = 0; code < 256; ++code) {
      if ((code & 0x7f) == 0x7f) {
        continue;  // the two NaN codes
      }
      const int tile = (code + e + 13) % kModel1Tiles;
      const std::vector<uint16_t> latent = latent_with(tile, e, fp8_e4m3_to_float(static_cast<uint8_t>(code)));
      model1_pack_token(latent.data(), kTokens, 1, page.data());
      const uint8_t* data = page.data() + kModel1DataBytes;
      const uint8_t* scales = page.data() + kTokens * kModel1DataBytes + 8;
      ASSERT_EQ(scales[tile], e + 127) << "e " << e;
      ASSERT_EQ(data[tile * kModel1TileDims + 1 + (tile % 5)], code) << "e " << e << " code " << code;
      std::vector<uint16_t> back(kModel1Dims);
      model1_unpack_token(page.data(), kTokens, 1, back.data());
      ASSERT_EQ(back, latent) << "e " << e << " code " << code;
    }
}

// The largest exponent: an amax above 448 * 2^119 (up to the largest bf16) takes e = 120, where the
// codes up to 240 (those bf16 can hold at that scale) still round-trip exactly.
TEST(KvCacheModel1, TheLargestBf16AmaxTakesExponent120) {
  const uint16_t bf16_max = 0x7f7f;
  EXPECT_EQ(model1_scale_exponent(bf16_to_float(bf16_max)), 120);
  std::vector<uint8_t> page(model1_page_bytes(1));
  for (int code = 0; code < 256; ++code) {
    const float v = fp8_e4m3_to_float(static_cast<uint8_t>(code));
    if (std::isnan(v) || std::fabs(v) > 240.f) {
      continue;  // NaN codes, and values no bf16 holds at 2^120
    }
    std::vector<uint16_t> latent(kModel1Dims, float_to_bf16(0.f));
    latent[0] = bf16_max;
    latent[1] = float_to_bf16(std::ldexp(v, 120));
    model1_pack_token(latent.data(), 1, 0, page.data());
    ASSERT_EQ(page[kModel1DataBytes], 120 + 127);
    ASSERT_EQ(page[1], code);
    std::vector<uint16_t> back(kModel1Dims);
    model1_unpack_token(page.data(), 1, 0, back.data());
    ASSERT_EQ(back[1], latent[1]) << "code " << code;
  }
}

TEST(KvCacheModel1, PackWritesOnlyItsTokensBytesAtTheirPlaces) {
  constexpr int64_t kTokens = 3;
  std::vector<uint8_t> page(model1_page_bytes(kTokens), 0xa5);
  const std::vector<uint16_t> latent = latent_with(2, 3, 1.5f);
  model1_pack_token(latent.data(), kTokens, 1, page.data());
  for (int64_t b = 0; b < static_cast<int64_t>(page.size()); ++b) {
    const bool data = b >= kModel1DataBytes && b < 2 * kModel1DataBytes;
    const bool scales = b >= kTokens * kModel1DataBytes + 8 && b < kTokens * kModel1DataBytes + 16;
    if (!data && !scales) {
      ASSERT_EQ(page[b], 0xa5) << "byte " << b << " outside token 1";
    }
  }
  EXPECT_EQ(page[kTokens * kModel1DataBytes + 8 + 7], 0);  // the pad byte
  // Rope: bf16 little endian at [448, 576) of the token's data.
  EXPECT_EQ(page[kModel1DataBytes + kModel1NopeDims], latent[kModel1NopeDims] & 0xff);
  EXPECT_EQ(page[kModel1DataBytes + kModel1NopeDims + 1], latent[kModel1NopeDims] >> 8);
}

// Half the spacing of fp8 e4m3 values around magnitude v: 2^(k - 3) in the binade [2^k, 2^(k+1)),
// 2^-9 among the subnormals (k < -6).
double fp8_half_step(double v) {
  const int k = v > 0 ? std::max(static_cast<int>(std::floor(std::log2(v))), -6) : -6;
  return std::ldexp(1.0, k - 4);
}

TEST(KvCacheModel1, RandomLatentsComeBackWithinHalfAnFp8Step) {
  constexpr int64_t kTokens = 64;
  std::vector<uint8_t> page(model1_page_bytes(kTokens));
  Rng rng(11);
  for (int64_t t = 0; t < kTokens; ++t) {
    HostTensor latent(DType::bf16, {kModel1Dims});
    fill_normal(latent, rng, 0.0, std::ldexp(1.0, static_cast<int>(rng.integer(-20, 20))));
    const uint16_t* x = latent.data<uint16_t>();
    model1_pack_token(x, kTokens, t, page.data());
    std::vector<uint16_t> back(kModel1Dims);
    model1_unpack_token(page.data(), kTokens, t, back.data());
    for (int d = 0; d < kModel1NopeDims; ++d) {
      const int e = page[kTokens * kModel1DataBytes + t * 8 + d / kModel1TileDims] - 127;
      const double v = std::fabs(bf16_to_float(x[d])), got = std::fabs(bf16_to_float(back[d]));
      ASSERT_LE(std::fabs(v - got), std::ldexp(fp8_half_step(std::ldexp(v, -e)), e)) << "token " << t << " dim " << d;
    }
    for (int d = kModel1NopeDims; d < kModel1Dims; ++d) ASSERT_EQ(back[d], x[d]) << "rope dim " << d;
  }
}

}  // namespace
}  // namespace dsv4h::reference
