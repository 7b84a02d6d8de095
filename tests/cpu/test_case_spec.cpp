// Case strings are the names users type: canonical forms, defaults and errors that name the field.
#include <gtest/gtest.h>

#include "harness/component.h"
#include "harness/errors.h"

namespace dsv4h {
namespace {

TEST(CaseSpec, CanonicalStringFillsDefaultsInSchemaOrder) {
  const Case c = parse_case("filtered_silu_mul(kept=0.50, rows=7,seed=42)");
  EXPECT_EQ(c.str(), "filtered_silu_mul(rows=7,inter=2048,kept=0.5,step=1,limit=10,adversarial=0,seed=42)");
  EXPECT_EQ(parse_case(c.str()).str(), c.str());
  EXPECT_EQ(c.test_name(), "filtered_silu_mul_rows_7_inter_2048_kept_0_5_step_1_limit_10_adversarial_0_seed_42");
}

TEST(CaseSpec, SeedDefaultsWhenAbsent) {
  EXPECT_EQ(parse_case("filtered_silu_mul", 9).seed(), 9u);
  EXPECT_EQ(parse_case("filtered_silu_mul(seed=3)", 9).seed(), 3u);
}

void expect_bad(const std::string& text, const std::string& mentions) {
  try {
    parse_case(text);
    FAIL() << "accepted " << text;
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
  }
}

TEST(CaseSpec, ErrorsNameTheField) {
  expect_bad("filtered_silu_mul(rows=1.5)", "\"rows\" must be an integer");
  expect_bad("filtered_silu_mul(rowz=1)", "unknown parameter \"rowz\"");
  expect_bad("filtered_silu_mul(kept=abc)", "\"kept\" must be a finite decimal number");
  expect_bad("filtered_silu_mul(seed=-1)", "seed must be a non-negative integer");
  expect_bad("filtered_silu_mul(rows=1", "missing closing parenthesis");
  expect_bad("filtered_silu_mul(rows)", "\"rows\" is not key=value");
  expect_bad("no_such_component(rows=1)", "unknown component \"no_such_component\"");
  expect_bad("filtered_silu_mul(rows=0x10)", "\"rows\" must be a finite decimal number");
}

}  // namespace
}  // namespace dsv4h
