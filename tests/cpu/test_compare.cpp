// The comparison must fail on every kind of wrong output: a value off by more than its budget, an
// element written that should not be, an element never written, a NaN.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/compare.h"

namespace dsv4h {
namespace {

HostTensor bf16_tensor(std::vector<double> values) {
  HostTensor t(DType::bf16, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.set(i, values[i]);
  return t;
}

OutputComparison compare_bf16(const HostTensor& e, const HostTensor& g) {
  return compare_output("out", e, Poison::a, g, Poison::a, ToleranceClass::bf16_rounded_once);
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
  const OutputComparison c = compare_output("out", e, Poison::a, g, Poison::b, ToleranceClass::exact);
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
  const OutputComparison c = compare_output("out", e, Poison::a, g, Poison::a, ToleranceClass::exact);
  EXPECT_EQ(c.value_mismatches, 2);
  HostTensor e8(DType::fp8_e4m3, {1}), g8(DType::fp8_e4m3, {1});
  e8.set(0, 1.0), g8.set_bits(0, 0x7f);
  EXPECT_FALSE(compare_output("q", e8, Poison::a, g8, Poison::b, ToleranceClass::exact).passed());
}

TEST(Compare, IntegersAreExact) {
  HostTensor e(DType::i32, {2, 2}), g(DType::i32, {2, 2});
  for (int i = 0; i < 4; ++i) e.set(i, i), g.set(i, i);
  g.set(3, 4);
  const OutputComparison c = compare_output("idx", e, Poison::a, g, Poison::a, ToleranceClass::exact);
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
    const OutputComparison c = compare_output("x", e, Poison::a, g, Poison::b, ToleranceClass::exact);
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
}

}  // namespace
}  // namespace dsv4h
