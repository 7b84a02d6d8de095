// filtered_silu_mul on the GPU against the reference: every verify case for three seeds and the
// golden fixtures (exactly representable inputs, outputs worked out independently). Each run
// poisons its outputs twice. Its shrunk counterexamples run with every component's
// (test_regressions_gpu.cpp).
#include <gtest/gtest.h>

#include "gpu_env.h"
#include "harness/case_file.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

const Component& component() { return registry().get("filtered_silu_mul"); }

std::vector<Case> verify_cases() {
  std::vector<Case> cases;
  for (const std::string& text : component().verify_cases)
    for (uint64_t seed : {1, 2, 3}) cases.push_back(parse_case(text, seed));
  cases.push_back(parse_case("filtered_silu_mul(rows=8192,inter=2048,kept=0.5,seed=7)"));
  return cases;
}

class FilteredSiluMulGpu : public ::testing::TestWithParam<Case> {};

TEST_P(FilteredSiluMulGpu, MatchesReference) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Case& c = GetParam();
  std::printf("case %s (seed %llu)\n", c.str().c_str(), static_cast<unsigned long long>(c.seed()));
  const CaseRun run = run_case(component(), c, gpu);
  EXPECT_TRUE(run.result.passed()) << run.result.report();
}

INSTANTIATE_TEST_SUITE_P(VerifyCases, FilteredSiluMulGpu, ::testing::ValuesIn(verify_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.test_name(); });

// The golden outputs are the checks that do not rest on the reference: a wrong fixtures folder
// must fail them, not skip them.
TEST(FilteredSiluMulGpuFixtures, GoldenOutputs) {
  DSV4H_GPU_OR_SKIP(gpu);
  int ran = 0;
  for (const std::string& path : json_files_in(fixtures_dir() + "/filtered_silu_mul")) {
    const CaseFile f = load_case_file(path);
    ASSERT_EQ(f.test_case.component(), component().name) << path;
    ASSERT_TRUE(f.expected.has_value()) << path;
    std::printf("fixture %s: %s\n", path.c_str(), f.test_case.str().c_str());
    const CaseRun run = run_case(component(), f.test_case, gpu, f.inputs, f.expected, path);
    EXPECT_TRUE(run.result.passed()) << run.result.report();
    ++ran;
  }
  EXPECT_GE(ran, 3) << "golden fixtures of " << component().name << " under " << fixtures_dir();
}

}  // namespace
}  // namespace dsv4h
