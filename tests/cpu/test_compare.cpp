// The comparison must fail on every kind of wrong output: a value off by more than its budget, an
// element written that should not be, an element never written, a NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "harness/compare.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

OutputCheck check_of(ToleranceClass tolerance, Comparator comparator = Comparator::elementwise, int64_t terms = 0,
                     std::string scores = "") {
  return {tolerance, comparator, terms, std::move(scores)};
}

HostTensor bf16_tensor(std::vector<double> values) {
  HostTensor t(DType::bf16, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.set(i, values[i]);
  return t;
}

OutputComparison compare_bf16(const HostTensor& e, const HostTensor& g) {
  return compare_output("out", e, Poison::a, g, Poison::a, check_of(ToleranceClass::bf16_rounded_once));
}

TEST(Compare, OneUlpPassesTwoFail) {
  const HostTensor e = bf16_tensor({1.0, 2.0, -4.0});
  EXPECT_TRUE(compare_bf16(e, bf16_tensor({1.0 + 0x1.0p-7, 2.0, -4.0})).passed());
  const OutputComparison c = compare_bf16(e, bf16_tensor({1.0, 2.0 + 2 * 0x1.0p-6, -4.0}));
  EXPECT_FALSE(c.passed());
  EXPECT_EQ(c.value_mismatches, 1);
  ASSERT_EQ(c.worst.size(), 1u);
  EXPECT_EQ(c.worst[0].index, "[1]");
  EXPECT_NE(c.summary().find("[1]: 2 vs 2.03125"), std::string::npos) << c.summary();
}

TEST(Compare, ElementWrittenByOneSideOnlyFails) {
  HostTensor e = bf16_tensor({1.0, 2.0});
  HostTensor g = e;
  fill_poison(e, Poison::a);
  e.set(0, 1.0);
  const OutputComparison c = compare_bf16(e, g);  // got wrote element 1, expected left it
  EXPECT_EQ(c.write_mismatches, 1);
  EXPECT_FALSE(c.passed());
  const OutputComparison reverse = compare_bf16(g, e);  // got never wrote element 1
  EXPECT_EQ(reverse.write_mismatches, 1);
}

TEST(Compare, BothUnwrittenIsNotAComparison) {
  HostTensor e(DType::bf16, {4}), g(DType::bf16, {4});
  fill_poison(e, Poison::a);
  fill_poison(g, Poison::b);
  const OutputComparison c = compare_output("out", e, Poison::a, g, Poison::b, OutputCheck{});
  EXPECT_TRUE(c.passed());
  EXPECT_EQ(c.unwritten, 4);
  EXPECT_EQ(c.compared, 0);
}

TEST(Compare, NanAgainstANumberFails) {
  const OutputComparison c = compare_bf16(bf16_tensor({1.0}), bf16_tensor({NAN}));
  EXPECT_FALSE(c.passed());
  EXPECT_EQ(c.nan_got, 1);
}

TEST(Compare, ExactNanAgainstANumberFails) {
  HostTensor e(DType::bf16, {2}), g(DType::bf16, {2});
  e.set(0, 1.0), g.set(0, NAN);
  e.set(1, 0.0), g.set(1, -0.0);
  const OutputComparison c = compare_output("out", e, Poison::a, g, Poison::a, OutputCheck{});
  EXPECT_EQ(c.value_mismatches, 2);
  HostTensor e8(DType::fp8_e4m3, {1}), g8(DType::fp8_e4m3, {1});
  e8.set(0, 1.0), g8.set_bits(0, 0x7f);
  EXPECT_FALSE(compare_output("q", e8, Poison::a, g8, Poison::b, OutputCheck{}).passed());
}

TEST(Compare, IntegersAreExact) {
  HostTensor e(DType::i32, {2, 2}), g(DType::i32, {2, 2});
  for (int i = 0; i < 4; ++i) e.set(i, i), g.set(i, i);
  g.set(3, 4);
  const OutputComparison c = compare_output("idx", e, Poison::a, g, Poison::a, OutputCheck{});
  EXPECT_EQ(c.value_mismatches, 1);
  EXPECT_EQ(c.worst.at(0).index, "[1, 1]");
}

// Integer outputs take a typed fast path; every kind of element must still be counted as before.
TEST(Compare, IntegerCountsEveryKindOfElement) {
  for (DType dtype : {DType::u8, DType::i32, DType::i64}) {
    HostTensor e(dtype, {6}), g(dtype, {6});
    fill_poison(e, Poison::a);
    fill_poison(g, Poison::b);
    e.set(0, 7), g.set(0, 7);  // equal
    e.set(1, 9), g.set(1, 8);  // unequal
    e.set(2, 5);               // written by the reference only
    g.set(3, 5);               // written by the kernel only
    e.set_bits(4, poison_bits(dtype, Poison::a));  // 4 and 5 unwritten on both sides
    const OutputComparison c = compare_output("x", e, Poison::a, g, Poison::b, OutputCheck{});
    EXPECT_EQ(c.compared, 2) << dtype_name(dtype);
    EXPECT_EQ(c.value_mismatches, 1) << dtype_name(dtype);
    EXPECT_EQ(c.write_mismatches, 2) << dtype_name(dtype);
    EXPECT_EQ(c.unwritten, 2) << dtype_name(dtype);
    ASSERT_FALSE(c.worst.empty());
  }
}

TEST(Compare, ShapeMismatchFails) {
  EXPECT_FALSE(compare_bf16(bf16_tensor({1.0, 2.0}), bf16_tensor({1.0})).passed());
}

TEST(Tolerance, EveryClassStatesFormulaAndReason) {
  for (const ToleranceSpec& spec : tolerance_table()) {
    EXPECT_FALSE(spec.formula.empty()) << spec.name;
    EXPECT_FALSE(spec.reason.empty()) << spec.name;
  }
  EXPECT_EQ(tolerance_for(DType::i32), ToleranceClass::exact);
  EXPECT_EQ(tolerance_for(DType::bf16), ToleranceClass::bf16_rounded_once);
  EXPECT_EQ(tolerance_for(DType::f32), ToleranceClass::fp32_rounded_once);
}

TEST(Tolerance, EveryClassStatesItsDistributionBounds) {
  for (const ToleranceSpec& spec : tolerance_table()) {
    EXPECT_FALSE(spec.distribution.empty()) << spec.name;
    const DistributionBound b = distribution_bound(check_of(spec.id, Comparator::elementwise, 1024));
    EXPECT_GE(b.min_elements, 1) << spec.name;
    EXPECT_LE(b.min_exact_rate, 1.0) << spec.name;
  }
}

TEST(Tolerance, AccumulatedClassesNeedTheirK) {
  EXPECT_THROW(allowed_error(check_of(ToleranceClass::fp32_accumulated), 1.0), std::logic_error);
  EXPECT_THROW(allowed_error(check_of(ToleranceClass::fp32_lse), 1.0), std::logic_error);
  // gamma_K |e| + ulp(e): the bound grows with K.
  EXPECT_LT(allowed_error(check_of(ToleranceClass::fp32_accumulated, Comparator::elementwise, 16), 1.0),
            allowed_error(check_of(ToleranceClass::fp32_accumulated, Comparator::elementwise, 4096), 1.0));
  EXPECT_DOUBLE_EQ(allowed_row_rel_l2(check_of(ToleranceClass::fp32_accumulated, Comparator::row_rel_l2, 1024)),
                   129 * 0x1.0p-24);
  EXPECT_THROW(allowed_row_rel_l2(check_of(ToleranceClass::fp32_lse, Comparator::row_rel_l2, 16)), std::logic_error);
}

// A check without a per-element bound is an error at the first element compared, also where every
// element is equal (the float path's shortcut for equal elements must not skip the bound).
TEST(Compare, ElementwiseWithoutABoundThrowsAlsoOnEqualOutputs) {
  const HostTensor e = bf16_tensor({1.0, 2.0, 3.0});
  EXPECT_THROW(compare_output("out", e, Poison::a, e, Poison::a, check_of(ToleranceClass::fp32_accumulated)),
               std::logic_error);
  EXPECT_THROW(compare_output("out", e, Poison::a, e, Poison::a,
                              check_of(ToleranceClass::fp32_over_bf16_stage, Comparator::elementwise, 64)),
               std::logic_error);
}

HostTensor f32_tensor(const Shape& shape, const std::vector<double>& values) {
  HostTensor t(DType::f32, shape);
  for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
  return t;
}

TEST(Compare, F32OutputsWithinOneUlp) {
  const HostTensor e = f32_tensor({3}, {1.0, -3.0, 1e-3});
  // An output its descriptor names no check for: elementwise under its dtype's class.
  const OutputCheck check = output_check(registry().get("filtered_silu_mul"), parse_case("filtered_silu_mul()"),
                                         "f32_output", DType::f32);
  EXPECT_EQ(check.tolerance, ToleranceClass::fp32_rounded_once);
  EXPECT_TRUE(compare_output("out", e, Poison::a, f32_tensor({3}, {1.0 + 0x1.0p-23, -3.0, 1e-3}), Poison::a, check)
                  .passed());
  const OutputComparison c =
      compare_output("out", e, Poison::a, f32_tensor({3}, {1.0, -3.0 - 0x1.0p-21, 1e-3}), Poison::a, check);
  EXPECT_EQ(c.value_mismatches, 1);
  EXPECT_EQ(c.worst.at(0).index, "[1]");
}

// A row of a cancelling sum: its small elements carry errors far beyond their own relative bound,
// yet the row is right; a row off by more than its bound fails, and the report names it.
TEST(Compare, RowRelativeL2JudgesRowsNotElements) {
  const int64_t K = 1024, cols = 8;
  const double bound = allowed_row_rel_l2(check_of(ToleranceClass::fp32_accumulated, Comparator::row_rel_l2, K));
  std::vector<double> expected, good, bad;
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      const double e = j == 0 ? 1e-6 : 1.0 + j;  // element 0 of each row: what a cancelling sum left
      const double drift = (j % 2 ? 1 : -1) * 0.2 * bound * 4;  // an absolute error near the row's scale
      expected.push_back(e);
      good.push_back(e + drift);
      bad.push_back(r == 1 ? e * (1 + 4 * bound) : e + drift);
    }
  const HostTensor e = f32_tensor({3, cols}, expected);
  const OutputCheck per_row = check_of(ToleranceClass::fp32_accumulated, Comparator::row_rel_l2, K);
  EXPECT_TRUE(compare_output("y", e, Poison::a, f32_tensor({3, cols}, good), Poison::a, per_row).passed());
  const OutputCheck per_element = check_of(ToleranceClass::fp32_accumulated, Comparator::elementwise, K);
  EXPECT_FALSE(compare_output("y", e, Poison::a, f32_tensor({3, cols}, good), Poison::a, per_element).passed());
  const OutputComparison c = compare_output("y", e, Poison::a, f32_tensor({3, cols}, bad), Poison::a, per_row);
  EXPECT_FALSE(c.passed());
  EXPECT_EQ(c.value_mismatches, 1);
  ASSERT_EQ(c.worst.size(), 1u);
  EXPECT_EQ(c.worst[0].index, "[1, :]");
  EXPECT_NE(c.summary().find("row_rel_l2"), std::string::npos) << c.summary();
}

// Two rows of six candidates; the reference keeps the top 3 of each.
struct TopK {
  TensorMap scores;
  HostTensor expected = HostTensor(DType::i32, {2, 3});
  TopK() {
    scores["logits"] = f32_tensor({2, 6}, {5, 4, 3, 3, 1, 0,   // row 0: candidates 2 and 3 tie at the boundary
                                           9, 8, 7, 6, 5, 4});
    set(expected, {0, 1, 2, 5, 4, -1});  // row 1: only two kept, padded with -1
  }
  static void set(HostTensor& t, const std::vector<int>& values) {
    for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
  }
  OutputComparison against(const std::vector<int>& got_values, ToleranceClass scores_class = ToleranceClass::exact) {
    HostTensor got(DType::i32, {2, 3});
    set(got, got_values);
    return compare_output("topk", expected, Poison::a, got, Poison::a,
                          check_of(scores_class, Comparator::topk_set, 0, "logits"), &scores);
  }
};

TEST(CompareTopK, OrderDoesNotMatterNorTiesAtTheBoundary) {
  TopK t;
  EXPECT_TRUE(t.against({2, 0, 1, -1, 5, 4}).passed());
  const OutputComparison tie = t.against({3, 1, 0, 5, 4, -1});  // 3 instead of 2: equal scores
  EXPECT_TRUE(tie.passed()) << tie.summary();
  EXPECT_EQ(tie.tied_swaps, 1);
}

TEST(CompareTopK, ARealSwapFailsNamingIndicesAndScores) {
  TopK t;
  const OutputComparison c = t.against({0, 1, 4, 5, 4, -1});  // 4 (score 1) instead of 2 (score 3)
  EXPECT_FALSE(c.passed());
  EXPECT_EQ(c.value_mismatches, 1);
  EXPECT_NE(c.summary().find("[0, :] (boundary score 3): index 2 (score 3) vs index 4 (score 1), |error| 2 > 0"),
            std::string::npos)
      << c.summary();
}

TEST(CompareTopK, PaddingIsPartOfTheSet) {
  TopK t;
  EXPECT_FALSE(t.against({0, 1, 2, 5, 4, 3}).passed());   // a candidate where the reference padded
  EXPECT_FALSE(t.against({0, 1, 2, 5, -1, -1}).passed());  // padding where the reference kept one
  EXPECT_FALSE(t.against({0, 1, 1, 5, 4, -1}).passed());   // a duplicate: multisets differ
}

TEST(CompareTopK, ScoresTiedWithinTheirTolerance) {
  TopK t;
  t.scores["logits"].set(3, 3.0 - 0x1.0p-21);  // 2 ulp of 3 below it: not tied under fp32_rounded_once's 1 ulp
  EXPECT_FALSE(t.against({0, 1, 3, 5, 4, -1}, ToleranceClass::fp32_rounded_once).passed());
  t.scores["logits"].set(3, 3.0 - 0x1.0p-22);  // 1 ulp of 3 (2^-22) below it: tied
  EXPECT_TRUE(t.against({0, 1, 3, 5, 4, -1}, ToleranceClass::fp32_rounded_once).passed());
  EXPECT_THROW(compare_output("topk", t.expected, Poison::a, t.expected, Poison::a,
                              check_of(ToleranceClass::exact, Comparator::topk_set, 0, "missing"), &t.scores),
               std::logic_error);
}

// A kernel that rounds toward +inf keeps every element within 1 ulp of the exact value; only the
// distribution of its errors shows the bias.
uint16_t bf16_round_up(double value) {
  const uint16_t nearest = double_to_bf16(value);
  const double rounded = bf16_to_float(nearest);
  if (rounded >= value) return nearest;
  return std::signbit(rounded) ? static_cast<uint16_t>(nearest - 1) : static_cast<uint16_t>(nearest + 1);
}

TEST(CompareDistribution, RoundingUpIsCaughtRoundingToNearestIsNot) {
  std::mt19937_64 rng(27);
  std::normal_distribution<double> normal(0.0, 10.0);
  HostTensor exact_rounding(DType::bf16, {1000}), near_rounding(DType::bf16, {1000}), up(DType::bf16, {1000});
  for (int64_t i = 0; i < 1000; ++i) {
    const double v = normal(rng);
    exact_rounding.set(i, v);
    near_rounding.set(i, static_cast<float>(v * (1 + 1e-6)));  // an fp32 kernel's small error, rounded once
    up.set_bits(i, bf16_round_up(v));
  }
  const OutputCheck check = check_of(ToleranceClass::bf16_rounded_once);
  const OutputComparison good = compare_output("out", exact_rounding, Poison::a, near_rounding, Poison::a, check);
  EXPECT_TRUE(good.passed()) << good.summary();
  EXPECT_TRUE(good.distribution_checked);
  EXPECT_GT(good.exact_agreement_rate, 0.99);
  const OutputComparison biased = compare_output("out", exact_rounding, Poison::a, up, Poison::a, check);
  EXPECT_EQ(biased.value_mismatches, 0) << "every element is within its 1-ulp bound";
  EXPECT_FALSE(biased.passed());
  EXPECT_FALSE(biased.distribution_passed);
  EXPECT_GT(biased.mean_signed_error_ulps, 0.3);
  EXPECT_LT(biased.exact_agreement_rate, 0.6);
  EXPECT_NE(biased.summary().find("MISMATCH"), std::string::npos);
  EXPECT_NE(biased.summary().find("distribution beyond its bounds"), std::string::npos) << biased.summary();
  // Below the element count the bounds need, a handful of elements decides nothing.
  const OutputComparison few =
      compare_output("out", exact_rounding.rows(0, 100), Poison::a, up.rows(0, 100), Poison::a, check);
  EXPECT_FALSE(few.distribution_checked);
  EXPECT_TRUE(few.passed());
}

// An f32 output holding e4m3 values (the indexer's quantised query) counts its errors in e4m3 ulps:
// one code flip at a rounding midpoint among 1000 elements is no bias (in f32 ulps it was a mean of
// -32, found on the H100); every element one code up is.
TEST(CompareDistribution, Fp8ValuesInAnF32OutputCountE4m3Ulps) {
  HostTensor expected(DType::f32, {1000}), one_flip(DType::f32, {1000}), all_up(DType::f32, {1000});
  for (int64_t i = 0; i < 1000; ++i) {
    const double v = 1.0 + static_cast<double>(i % 8) / 8;  // e4m3 values in [1, 2): ulp 1/8
    expected.set(i, v);
    one_flip.set(i, i == 500 ? v - 0.125 : v);
    all_up.set(i, v + 0.125);
  }
  const OutputCheck check = check_of(ToleranceClass::fp8_quantised);
  const OutputComparison flip = compare_output("q", expected, Poison::a, one_flip, Poison::a, check);
  EXPECT_TRUE(flip.passed()) << flip.summary();
  EXPECT_NEAR(flip.mean_signed_error_ulps, -0.001, 1e-12);
  const OutputComparison up = compare_output("q", expected, Poison::a, all_up, Poison::a, check);
  EXPECT_EQ(up.value_mismatches, 0) << "every element is within its 1-ulp bound";
  EXPECT_FALSE(up.passed()) << up.summary();
  EXPECT_NEAR(up.mean_signed_error_ulps, 1.0, 1e-12);
}

// The silu_round_up mutant (kernels/filtered_silu_mul.hip), emulated: the reference's fp32 result,
// as the kernel computes it, rounded toward +inf. Only the distribution check fails.
TEST(CompareDistribution, CatchesTheSiluRoundUpMutant) {
  const Component& component = registry().get("filtered_silu_mul");
  const Case c = parse_case("filtered_silu_mul(rows=64,inter=256,kept=0.5,seed=7)");
  const CaseRun run = run_case(component, c, nullptr);
  ASSERT_TRUE(run.result.passed()) << run.result.report();
  const HostTensor& reference = run.outputs.at("reference").at("out");
  TensorMap fp32 = {{"out", HostTensor(DType::f32, reference.shape())}};
  fill_poison(fp32, Poison::a);
  component.reference(c, run.inputs, fp32);
  HostTensor mutant = reference;
  for (int64_t i = 0; i < mutant.numel(); ++i)
    if (!is_poison(fp32.at("out"), i, Poison::a)) mutant.set_bits(i, bf16_round_up(fp32.at("out").get(i)));
  const OutputComparison cmp = compare_output("out", reference, Poison::a, mutant, Poison::a,
                                              output_check(component, c, "out", DType::bf16));
  EXPECT_EQ(cmp.write_mismatches, 0);
  EXPECT_EQ(cmp.value_mismatches, 0) << cmp.summary();
  EXPECT_TRUE(cmp.distribution_checked);
  EXPECT_FALSE(cmp.passed()) << cmp.summary();
}

TEST(CompareDistribution, RecordedInTheJson) {
  const HostTensor e = bf16_tensor({1.0, 2.0});
  const nlohmann::json j = comparison_to_json(compare_bf16(e, e));
  EXPECT_EQ(j.at("comparator"), "elementwise");
  EXPECT_EQ(j.at("distribution").at("exact_agreement_rate"), 1.0);
  EXPECT_EQ(j.at("distribution").at("min_exact_agreement_rate"), 0.9);
  EXPECT_EQ(j.at("distribution").at("max_abs_mean_signed_error_ulps"), 0.05);
  EXPECT_EQ(j.at("distribution").at("checked"), false);
}

}  // namespace
}  // namespace dsv4h
