// Every registered component's reference against its golden fixtures (fixtures/NAME/*.json, outputs
// worked out independently), on the CPU: the GPU suite's ComponentGolden test fails a component
// without one, and this finds it first (c4_decode_step reached the GPU without one, 2026-12-06).
#include <gtest/gtest.h>

#include "harness/case_file.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

TEST(GoldenFixtures, EveryComponentHasOneAndItsReferenceMatchesIt) {
  for (const Component& component : registry().all()) {
    const std::string dir = fixtures_dir() + "/" + component.name;
    int checked = 0;
    for (const std::string& path : json_files_in(dir)) {
      const CaseFile f = load_case_file(path);
      ASSERT_EQ(f.test_case.component(), component.name) << path;
      ASSERT_TRUE(f.expected.has_value()) << path << ": a golden fixture holds its expected outputs";
      const CaseRun run = run_case(component, f.test_case, nullptr, f.inputs, f.expected, path);
      EXPECT_TRUE(run.result.passed()) << path << ": " << run.result.report();
      ++checked;
    }
    EXPECT_GT(checked, 0) << "no golden fixtures of " << component.name << " under " << dir;
  }
}

}  // namespace
}  // namespace dsv4h
