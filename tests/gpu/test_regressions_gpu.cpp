// Every shrunk counterexample kept under fixtures/regressions/, of every component, on the GPU
// against the reference (and against its stored outputs where it has them): one test per file,
// named after it, in every GPU suite (test_gpu and each mutant's binary). A file whose component is
// not registered fails its test: a counterexample nobody runs protects nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "gpu_env.h"
#include "harness/case_file.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

class RegressionGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(RegressionGpu, MatchesReference) {
  DSV4H_GPU_OR_SKIP(gpu);
  const std::string& path = GetParam();
  const CaseFile f = load_case_file(path);  // BadInput (the test fails) for an unknown component
  std::printf("regression %s: %s\n", path.c_str(), f.test_case.str().c_str());
  const CaseRun run = run_case(registry().get(f.test_case.component()), f.test_case, gpu, f.inputs, f.expected, path);
  EXPECT_TRUE(run.result.passed()) << run.result.report();
}

// The file's name without .json, as gtest spells names: "filtered_silu_mul-silu-underflow.json"
// runs as RegressionGpu.MatchesReference/filtered_silu_mul_silu_underflow.
std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = std::filesystem::path(info.param).stem().string();
  std::replace_if(name.begin(), name.end(), [](unsigned char ch) { return !std::isalnum(ch); }, '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Regressions, RegressionGpu, ::testing::ValuesIn(json_files_in(fixtures_dir() + "/regressions")),
                         test_name);
// Regressions come and go: a tree without any is no error.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RegressionGpu);

}  // namespace
}  // namespace dsv4h
