// Bad input on the GPU path: the launch wrapper refuses impossible sizes naming the field, and
// nothing is launched; an out-of-range expert id is refused before any launch.
#include <gtest/gtest.h>

#include "gpu_env.h"
#include "harness/verify.h"
#include "kernels/filtered_silu_mul.h"

namespace dsv4h {
namespace {

void expect_refused(const FilteredSiluMulArgs& args, const std::string& mentions) {
  try {
    launch_filtered_silu_mul(args, nullptr);
    FAIL() << "launch accepted " << mentions;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
  }
}

TEST(FilteredSiluMulGpuBadInput, LaunchWrapperNamesTheField) {
  DSV4H_GPU_OR_SKIP(gpu);
  const FilteredSiluMulArgs ok{nullptr, nullptr, nullptr, 4, 8, 1, 10.f};
  FilteredSiluMulArgs a = ok;
  a.rows = -1;
  expect_refused(a, "rows must be >= 0");
  a = ok;
  a.inter = 0;
  expect_refused(a, "inter must be > 0");
  a = ok;
  a.expert_step = 0;
  expect_refused(a, "expert_step must be > 0");
  a = ok;
  a.swiglu_limit = -1.f;
  expect_refused(a, "swiglu_limit must be >= 0");
  expect_refused(ok, "null device pointer");
}

TEST(FilteredSiluMulGpuBadInput, NegativeExpertIdIsRefusedBeforeLaunch) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Component& component = registry().get("filtered_silu_mul");
  const Case c = parse_case("filtered_silu_mul(rows=4,inter=8,kept=1)");
  TensorMap inputs = component.make_inputs(c);
  inputs["expert_ids"].data<int32_t>()[3] = -7;
  const CaseRun run = run_case(component, c, gpu, inputs);
  EXPECT_EQ(run.result.status, CaseStatus::bad_input);
  EXPECT_NE(run.result.message.find("expert_ids[3] = -7"), std::string::npos) << run.result.message;
}

}  // namespace
}  // namespace dsv4h
