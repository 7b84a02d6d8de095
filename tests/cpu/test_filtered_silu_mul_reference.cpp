// The reference of filtered_silu_mul against golden outputs worked out independently
// (fixtures/filtered_silu_mul/make_golden.py), and its handling of bad input.
#include <gtest/gtest.h>

#include "harness/case_file.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

TEST(FilteredSiluMulReference, MatchesEveryGoldenFixture) {
  const std::vector<std::string> files = json_files_in(fixtures_dir() + "/filtered_silu_mul");
  ASSERT_GE(files.size(), 3u) << "golden fixtures missing under " << fixtures_dir();
  for (const std::string& path : files) {
    const CaseFile f = load_case_file(path);
    ASSERT_TRUE(f.expected.has_value()) << path;
    const CaseRun run = run_case(registry().get("filtered_silu_mul"), f.test_case, nullptr, f.inputs, f.expected, path);
    EXPECT_TRUE(run.result.passed()) << run.result.report();
    ASSERT_EQ(run.result.checks.size(), 1u);
    const OutputComparison& cmp = run.result.checks[0].second;
    EXPECT_GT(cmp.compared, 0) << path;
    EXPECT_GT(cmp.unwritten, 0) << path << ": every golden fixture has filtered rows";
  }
}

// Issue 27: the exact out[0, 0] is 207.4999998; stored through float it became 207.5 and then 208.
TEST(FilteredSiluMulReference, StoresEachResultRoundedOnce) {
  const CaseRun run = run_case(registry().get("filtered_silu_mul"),
                               parse_case("filtered_silu_mul(rows=1,inter=2,kept=1,limit=0,adversarial=1,seed=22)"),
                               nullptr);
  ASSERT_TRUE(run.result.passed()) << run.result.report();
  EXPECT_EQ(run.outputs.at("reference").at("out").get(0), 207.0);
}

CaseStatus status_of(const std::string& text, const std::optional<TensorMap>& inputs = std::nullopt) {
  return run_case(registry().get("filtered_silu_mul"), parse_case(text), nullptr, inputs).result.status;
}

TEST(FilteredSiluMulReference, ImpossibleShapesAreBadInput) {
  EXPECT_EQ(status_of("filtered_silu_mul(rows=-1)"), CaseStatus::bad_input);
  EXPECT_EQ(status_of("filtered_silu_mul(inter=0)"), CaseStatus::bad_input);
  EXPECT_EQ(status_of("filtered_silu_mul(step=0)"), CaseStatus::bad_input);
  EXPECT_EQ(status_of("filtered_silu_mul(kept=1.5)"), CaseStatus::bad_input);
  EXPECT_EQ(status_of("filtered_silu_mul(rows=0)"), CaseStatus::pass);
}

TEST(FilteredSiluMulReference, OutOfRangeExpertIdIsBadInputNamingIt) {
  const Case c = parse_case("filtered_silu_mul(rows=4,inter=8,kept=1)");
  TensorMap inputs = registry().get("filtered_silu_mul").make_inputs(c);
  inputs["expert_ids"].data<int32_t>()[2] = -2;
  const CaseRun run = run_case(registry().get("filtered_silu_mul"), c, nullptr, inputs);
  EXPECT_EQ(run.result.status, CaseStatus::bad_input);
  EXPECT_NE(run.result.message.find("expert_ids[2] = -2"), std::string::npos) << run.result.message;
}

TEST(FilteredSiluMulReference, WrongInputShapeIsBadInputNamingIt) {
  const Case c = parse_case("filtered_silu_mul(rows=4,inter=8)");
  TensorMap inputs = registry().get("filtered_silu_mul").make_inputs(parse_case("filtered_silu_mul(rows=5,inter=8)"));
  const CaseRun run = run_case(registry().get("filtered_silu_mul"), c, nullptr, inputs);
  EXPECT_EQ(run.result.status, CaseStatus::bad_input);
  EXPECT_NE(run.result.message.find("\"gate_up\" is bf16[5, 16], the case needs bf16[4, 16]"), std::string::npos)
      << run.result.message;
}

}  // namespace
}  // namespace dsv4h
