// Every registered component on the GPU against its reference: each verify case of its descriptor
// for three seeds, and its golden fixtures (fixtures/<component>/, outputs worked out apart from the
// reference). A component the build finds gets these checks with no edit here; its own test file
// adds what is particular to it. Test names hold the component's name, which its GPU test filter
// (Component::gpu_tests) selects, so that its mutants are judged on them too.
#include <gtest/gtest.h>

#include "gpu_env.h"
#include "harness/case_file.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

std::vector<Case> verify_cases() {
  std::vector<Case> cases;
  for (const Component& component : registry().all())
    for (const std::string& text : component.verify_cases)
      for (uint64_t seed : {1, 2, 3}) cases.push_back(parse_case(text, seed));
  return cases;
}

class ComponentGpu : public ::testing::TestWithParam<Case> {};

TEST_P(ComponentGpu, MatchesReference) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Case& c = GetParam();
  std::printf("case %s\n", c.str().c_str());
  const CaseRun run = run_case(registry().get(c.component()), c, gpu);
  EXPECT_TRUE(run.result.passed()) << run.result.report();
}

INSTANTIATE_TEST_SUITE_P(VerifyCases, ComponentGpu, ::testing::ValuesIn(verify_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.test_name(); });

class ComponentGolden : public ::testing::TestWithParam<std::string> {};

// The golden outputs are the checks that do not rest on the reference: a component without them,
// or a wrong fixtures folder, fails here rather than skipping.
TEST_P(ComponentGolden, GoldenOutputs) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Component& component = registry().get(GetParam());
  const std::string dir = fixtures_dir() + "/" + component.name;
  int ran = 0;
  for (const std::string& path : json_files_in(dir)) {
    const CaseFile f = load_case_file(path);
    ASSERT_EQ(f.test_case.component(), component.name) << path;
    ASSERT_TRUE(f.expected.has_value()) << path << ": a golden fixture holds its expected outputs";
    std::printf("fixture %s: %s\n", path.c_str(), f.test_case.str().c_str());
    const CaseRun run = run_case(component, f.test_case, gpu, f.inputs, f.expected, path);
    EXPECT_TRUE(run.result.passed()) << run.result.report();
    ++ran;
  }
  EXPECT_GT(ran, 0) << "no golden fixtures of " << component.name << " under " << dir;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ComponentGolden, ::testing::ValuesIn(testing::component_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace dsv4h
