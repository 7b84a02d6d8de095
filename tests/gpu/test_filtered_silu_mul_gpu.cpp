// filtered_silu_mul on the GPU against the reference beside its verify cases and golden fixtures
// (test_components_gpu.cpp) and its shrunk counterexamples (test_regressions_gpu.cpp): a batch of
// 8192 rows of the model's intermediate size, where the vector kernel's larger tiles run. Each run
// poisons its outputs twice.
#include <gtest/gtest.h>

#include "gpu_env.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

TEST(FilteredSiluMulGpu, ModelSizedBatchMatchesReference) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Case c = parse_case("filtered_silu_mul(rows=8192,inter=2048,kept=0.5,seed=7)");
  const CaseRun run = run_case(registry().get("filtered_silu_mul"), c, gpu);
  EXPECT_TRUE(run.result.passed()) << run.result.report();
}

}  // namespace
}  // namespace dsv4h
