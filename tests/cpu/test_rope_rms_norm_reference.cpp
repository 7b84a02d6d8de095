// The shared rope and RMSNorm references: spec 2.4's YaRN table (pairs up to 15 unchanged, from 25
// on divided by 16, computed for base 1.6e5), rotation and its inverse, and RMSNorm's definition.
#include <gtest/gtest.h>

#include <cmath>

#include "reference/rms_norm.h"
#include "reference/rope.h"

namespace dsv4h::reference {
namespace {

TEST(RopeReference, YarnTableOfTheCompressedLayers) {
  const Eigen::VectorXd plain = rope_frequencies({160000, false});
  const Eigen::VectorXd yarn = rope_frequencies(rope_for_ratio(4));
  ASSERT_EQ(yarn.size(), 32);
  for (int i = 0; i < 32; ++i) {
    EXPECT_DOUBLE_EQ(plain(i), std::pow(160000.0, -2.0 * i / 64));
    if (i <= 15) {
      EXPECT_DOUBLE_EQ(yarn(i), plain(i)) << i;
    } else if (i >= 25) {
      EXPECT_DOUBLE_EQ(yarn(i), plain(i) / 16) << i;
    } else {
      EXPECT_TRUE(yarn(i) < plain(i) && yarn(i) > plain(i) / 16) << i;
    }
  }
  EXPECT_EQ(rope_frequencies(rope_for_ratio(0)), rope_frequencies({10000, false}));
  EXPECT_EQ(rope_frequencies(rope_for_ratio(128)), yarn);
  EXPECT_THROW(rope_for_ratio(2), std::invalid_argument);
}

TEST(RopeReference, RotatesPairsAndTheInverseUndoesIt) {
  const Eigen::VectorXd freqs = rope_frequencies(rope_for_ratio(0));
  Eigen::VectorXd x = Eigen::VectorXd::LinSpaced(64, -1.5, 2.0);
  const Eigen::VectorXd original = x;
  apply_rope(x, 0, freqs);
  EXPECT_EQ(x, original);
  apply_rope(x, 1000, freqs);
  EXPECT_NEAR(x.norm(), original.norm(), 1e-12);
  // Pair 0 turns by pos * f_0 = 1000 radians.
  EXPECT_NEAR(x(0), original(0) * std::cos(1000.0) - original(1) * std::sin(1000.0), 1e-12);
  apply_rope(x, 1000, freqs, true);
  EXPECT_LT((x - original).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_THROW(apply_rope(x.head(63), 1, freqs), std::invalid_argument);
}

TEST(RmsNormReference, ScalesEachRowToUnitRms) {
  Eigen::MatrixXd rows(2, 4);
  rows << 1, 2, 3, 4, -2, 0, 0, 2;
  const Eigen::VectorXd w = Eigen::VectorXd::Constant(4, 2.0);
  const Eigen::MatrixXd y = rms_norm(rows, w, 0);
  EXPECT_NEAR(y(0, 0), 2 * 1 / std::sqrt(7.5), 1e-15);
  EXPECT_NEAR(y(1, 3), 2 * 2 / std::sqrt(2.0), 1e-15);
  EXPECT_NEAR(rms_norm(rows, w, 1e-6)(1, 0), 2 * -2 / std::sqrt(2.0 + 1e-6), 1e-15);
  EXPECT_THROW(rms_norm(rows, Eigen::VectorXd::Ones(3), 0), std::invalid_argument);
}

}  // namespace
}  // namespace dsv4h::reference
