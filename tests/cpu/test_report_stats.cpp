// Statistics of the nightly reports: medians, the Mann-Whitney U test against values worked out
// by brute force (every ordering enumerated in Python), and step detection.
#include <gtest/gtest.h>

#include <random>

#include "perf/stats.h"
#include "report_synthetic.h"

namespace dsv4h::report {
namespace {

TEST(ReportStats, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
}

TEST(ReportStats, CoefficientOfVariation) {
  EXPECT_DOUBLE_EQ(coefficient_of_variation({5}), 0);
  EXPECT_NEAR(coefficient_of_variation({9, 10, 11}), 0.1, 1e-12);
}

TEST(ReportStats, MannWhitneyExactWithoutTies) {
  // Enumerated: 58 of the 792 orderings are at least as extreme as U = 29.
  const MannWhitney r = mann_whitney({3.5, 5.5, 7.5, 8.5, 9.5}, {1, 2, 3, 4, 5, 6, 7});
  EXPECT_DOUBLE_EQ(r.u, 29);
  EXPECT_NEAR(r.p_value, 58.0 / 792.0, 1e-12);
  // Complete separation of 10 and 10: the two most extreme of C(20, 10) orderings.
  std::vector<double> low, high;
  for (int i = 1; i <= 10; ++i) low.push_back(i), high.push_back(10 + i);
  EXPECT_NEAR(mann_whitney(high, low).p_value, 2.0 / 184756.0, 1e-15);
  EXPECT_DOUBLE_EQ(mann_whitney(low, high).u, 0);
}

TEST(ReportStats, MannWhitneyNormalApproximationWithTies) {
  // Tie-corrected variance and continuity correction, worked out in Python.
  const MannWhitney r = mann_whitney({1, 2, 2, 3, 5, 7, 8, 9, 9, 10, 11, 12}, {2, 3, 4, 5, 9, 13, 14, 15, 16, 17, 18, 19});
  EXPECT_DOUBLE_EQ(r.u, 38);
  EXPECT_NEAR(r.p_value, 0.05258153850852845, 1e-12);
  EXPECT_DOUBLE_EQ(mann_whitney({1, 1, 1}, {1, 1}).p_value, 1.0);
}

// Nightly medians of 20 nights at 3% noise (the median of 10 repetitions each), with a `step`
// from night `at` on.
std::vector<double> nightly_medians(uint64_t seed, int at, double step) {
  std::mt19937_64 rng(seed);
  std::vector<double> medians;
  for (int night = 0; night < 20; ++night)
    medians.push_back(median(testing::draw_times(rng, night >= at ? 100 * (1 + step) : 100, 0.03)));
  return medians;
}

TEST(ReportStats, StepIsFoundAtItsNight) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    for (int at : {2, 7, 13, 18}) {
      const std::optional<Step> s = detect_step(nightly_medians(seed, at, 0.10), 0.05, 0.05);
      ASSERT_TRUE(s) << "seed " << seed << ", step at night " << at;
      EXPECT_EQ(s->index, static_cast<size_t>(at)) << "seed " << seed;
      EXPECT_NEAR(s->change, 0.10, 0.03);
    }
  }
}

TEST(ReportStats, NoStepInNoise) {
  for (uint64_t seed = 1; seed <= 20; ++seed)
    EXPECT_FALSE(detect_step(nightly_medians(seed, 0, 0.0), 0.05, 0.05)) << "seed " << seed;
}

TEST(ReportStats, ShortHistoriesHaveNoStep) {
  EXPECT_FALSE(detect_step({1, 2, 3}, 0.05, 0.05));
}

// Times of 1.7e308: the median of two is already infinite, so every split scores inf - inf, NaN.
// No step, rather than a read of no split (the history reader refuses such times; the rule holds
// without it).
TEST(ReportStats, NoStepWhereEverySplitScoresNaN) {
  EXPECT_FALSE(detect_step({1.7e308, 1.7e308, 1.7e308, 1.7e308, 1.7e308, 1.7e308}, 0.05, 0.05));
}

}  // namespace
}  // namespace dsv4h::report
