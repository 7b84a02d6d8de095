// The indexer K cache entry reference (spec 4.2): page bytes, byte positions, the scale rule, and
// every fp8 code at every scale exponent that can occur, packed and unpacked exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "harness/dtype.h"
#include "harness/random.h"
#include "reference/kv_cache_indexer.h"

namespace dsv4h::reference {
namespace {

constexpr uint16_t kBf16Max = 0x7f7f;  // (2 - 2^-7) * 2^127

TEST(KvCacheIndexer, PageBytesAsInTheSpec) { EXPECT_EQ(indexer_page_bytes(64), 8448); }

TEST(KvCacheIndexer, ScaleIsTheSmallestPowerOfTwoThatFitsWithTheFloorOnAmax) {
  EXPECT_EQ(indexer_scale_exponent(448.f), 0);
  EXPECT_EQ(indexer_scale_exponent(std::nextafter(448.f, 1e9f)), 1);
  EXPECT_EQ(indexer_scale_exponent(224.f), -1);
  EXPECT_EQ(indexer_scale_exponent(0.f), -22);  // 1e-4 / 448 = 2^-22.1
  EXPECT_EQ(indexer_scale_exponent(448.f * 0x1p-22f), -22);
  EXPECT_EQ(indexer_scale_exponent(448.f * 0x1p-23f), -22);
  EXPECT_EQ(indexer_scale_exponent(bf16_to_float(kBf16Max)), 120);
  // Against the definition in long double at every bf16 magnitude of one binade per exponent.
  for (int k = -40; k < 128; ++k)
    for (int m = 0; m < 128; ++m) {
      const float amax = std::ldexp(1.f + m / 128.f, k);
      const long double s = std::max<long double>(amax, 1e-4f) / 448.0L;
      ASSERT_EQ(indexer_scale_exponent(amax), static_cast<int>(std::ceil(std::log2(s)))) << amax;
    }
}

// The amax that fixes the scale at 2^e: 448 * 2^e, or the largest bf16 for e = 120.
uint16_t amax_for(int e) { return e == 120 ? kBf16Max : float_to_bf16(std::ldexp(448.f, e)); }

TEST(KvCacheIndexer, EveryFp8CodeAtEveryScaleExponentRoundTripsExactly) {
  constexpr int64_t kEntries = 3;
  std::vector<uint8_t> page(indexer_page_bytes(kEntries));
  for (int e = -22; e <= 120; ++e)
    for (int code = 0; code < 256; ++code) {
      if ((code & 0x7f) == 0x7f) {
        continue;  // the two NaN codes
      }
      const double value = std::ldexp(static_cast<double>(fp8_e4m3_to_float(static_cast<uint8_t>(code))), e);
      if (std::fabs(value) > bf16_to_float(kBf16Max)) {
        continue;  // no bf16 key holds it (codes above 255 at e = 120)
      }
      std::vector<uint16_t> key(kIndexerDims, float_to_bf16(0.f));
      const int at = 1 + (code + e + 22) % (kIndexerDims - 1);
      key[0] = amax_for(e);
      key[at] = float_to_bf16(static_cast<float>(value));
      indexer_pack_entry(key.data(), kEntries, 2, page.data());
      float scale;
      std::memcpy(&scale, page.data() + kEntries * kIndexerDims + 2 * 4, 4);
      ASSERT_EQ(scale, std::ldexp(1.f, e)) << "e " << e;
      ASSERT_EQ(page[2 * kIndexerDims + at], code) << "e " << e << " code " << code;
      std::vector<float> back(kIndexerDims);
      indexer_unpack_entry(page.data(), kEntries, 2, back.data());
      for (int i = 1; i < kIndexerDims; ++i) ASSERT_EQ(back[i], bf16_to_float(key[i])) << "e " << e << " dim " << i;
    }
}

TEST(KvCacheIndexer, TheLargestBf16KeyRoundsUpToTwoToThe128) {
  std::vector<uint8_t> page(indexer_page_bytes(1));
  std::vector<uint16_t> key(kIndexerDims, kBf16Max);
  indexer_pack_entry(key.data(), 1, 0, page.data());
  EXPECT_EQ(page[0], 0x78);  // 255 rounds to 256 = 2^8 at scale 2^120
  std::vector<float> back(kIndexerDims);
  indexer_unpack_entry(page.data(), 1, 0, back.data());
  EXPECT_TRUE(std::isinf(back[0]));
}

TEST(KvCacheIndexer, PackWritesOnlyItsEntrysBytesAtTheirPlaces) {
  constexpr int64_t kEntries = 4;
  std::vector<uint8_t> page(indexer_page_bytes(kEntries), 0xa5);
  Rng rng(5);
  HostTensor key(DType::bf16, {kIndexerDims});
  fill_normal(key, rng, 0.0, 3.0);
  indexer_pack_entry(key.data<uint16_t>(), kEntries, 1, page.data());
  for (int64_t b = 0; b < static_cast<int64_t>(page.size()); ++b) {
    const bool values = b >= kIndexerDims && b < 2 * kIndexerDims;
    const bool scale = b >= kEntries * kIndexerDims + 4 && b < kEntries * kIndexerDims + 8;
    if (!values && !scale) {
      ASSERT_EQ(page[b], 0xa5) << "byte " << b << " outside entry 1";
    }
  }
}

TEST(KvCacheIndexer, RandomKeysComeBackWithinHalfAnFp8Step) {
  constexpr int64_t kEntries = 64;
  std::vector<uint8_t> page(indexer_page_bytes(kEntries));
  const uint64_t seed = 23;
  Rng rng(seed);
  for (int64_t t = 0; t < kEntries; ++t) {
    HostTensor key(DType::bf16, {kIndexerDims});
    fill_normal(key, rng, 0.0, std::ldexp(1.0, static_cast<int>(rng.integer(-30, 30))));
    const uint16_t* x = key.data<uint16_t>();
    indexer_pack_entry(x, kEntries, t, page.data());
    std::vector<float> back(kIndexerDims);
    indexer_unpack_entry(page.data(), kEntries, t, back.data());
    float scale;
    std::memcpy(&scale, page.data() + kEntries * kIndexerDims + t * 4, 4);
    for (int d = 0; d < kIndexerDims; ++d) {
      const double v = std::fabs(bf16_to_float(x[d])) / scale;
      // Half the fp8 spacing at v: 2^(k - 4) in the binade [2^k, 2^(k+1)), 2^-10 among subnormals.
      const int k = v > 0 ? std::max(static_cast<int>(std::floor(std::log2(v))), -6) : -6;
      ASSERT_LE(std::fabs(bf16_to_float(x[d]) - back[d]), std::ldexp(1.0, k - 4) * scale)
          << "seed " << seed << " entry " << t << " dim " << d;
    }
  }
}

}  // namespace
}  // namespace dsv4h::reference
