// Seeded inputs: a seed names the same values every time, and each generator stays in its range.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/random.h"

namespace dsv4h {
namespace {

TEST(Random, SameSeedSameValuesOtherSeedOtherValues) {
  HostTensor a(DType::f32, {256}), b(DType::f32, {256}), c(DType::f32, {256});
  Rng ra(7), rb(7), rc(8);
  fill_normal(a, ra, 0.0, 1.0);
  fill_normal(b, rb, 0.0, 1.0);
  fill_normal(c, rc, 0.0, 1.0);
  int same_as_other_seed = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    ASSERT_EQ(a.bits(i), b.bits(i)) << i;
    same_as_other_seed += a.bits(i) == c.bits(i);
  }
  EXPECT_LT(same_as_other_seed, 4);
}

// Inputs made in pieces side by side (sparse_attention's pools) are the stream made in order.
TEST(Random, AheadIsTheStreamThatManyDrawsOn) {
  const Rng start(11);
  for (uint64_t draws : {0ull, 1ull, 2ull, 1023ull, 1024ull, 100000ull}) {
    Rng walked = start;
    for (uint64_t i = 0; i < draws; ++i) walked.next();
    Rng jumped = start.ahead(draws);
    for (int i = 0; i < 4; ++i) ASSERT_EQ(jumped.next(), walked.next()) << draws << " draws on, draw " << i;
  }
}

TEST(Random, GeneratorsStayInRangeAndCoverIt) {
  Rng rng(3);
  HostTensor u(DType::f32, {4096}), k(DType::i32, {4096}), n(DType::f32, {4096});
  fill_uniform(u, rng, -2.0, 3.0);
  fill_integers(k, rng, -1, 5);
  fill_normal(n, rng, 10.0, 2.0);
  double u_min = 1e9, u_max = -1e9, mean = 0;
  bool seen[7] = {};
  for (int64_t i = 0; i < 4096; ++i) {
    u_min = std::min(u_min, u.get(i)), u_max = std::max(u_max, u.get(i));
    ASSERT_GE(k.get(i), -1);
    ASSERT_LE(k.get(i), 5);
    seen[static_cast<int>(k.get(i)) + 1] = true;
    mean += n.get(i) / 4096;
  }
  EXPECT_GE(u_min, -2.0);
  EXPECT_LT(u_max, 3.0);
  EXPECT_LT(u_min, -1.9);
  EXPECT_GT(u_max, 2.9);
  for (bool s : seen) EXPECT_TRUE(s);
  EXPECT_NEAR(mean, 10.0, 0.2);
}

TEST(Random, AdversarialValuesHitTheClampEdges) {
  Rng rng(5);
  HostTensor t(DType::bf16, {2048});
  fill_adversarial(t, rng, 10.0);
  int at_limit = 0, beyond = 0, negative_zero = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.get(i);
    at_limit += std::fabs(v) == 10.0;
    beyond += std::fabs(v) > 10.0;
    negative_zero += v == 0 && std::signbit(v);
  }
  EXPECT_GT(at_limit, 20);
  EXPECT_GT(beyond, 100);
  EXPECT_GT(negative_zero, 10);
}

}  // namespace
}  // namespace dsv4h
