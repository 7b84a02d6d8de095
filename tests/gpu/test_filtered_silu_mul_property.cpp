// Properties of filtered_silu_mul on the GPU over shapes biased to the kernel's edges: R from 0
// to 4097 (0, 1, odd, multiples of the 4-row tile, 2112 = one wave of 4-row blocks on the H200;
// the 8- to 16-row tiles of batches above 12672 rows are in the descriptor's verify cases, at a
// small I so that the reference stays cheap), I a multiple of 8 (vector path) or
// not (element path, partial last chunk), any kept fraction, expert_step 1, 16 or 64, swiglu_limit
// 0 (no clamp), DeepSeek-V4's 10 or others (a kernel that hard-codes 10 fails), normal or
// adversarial values. A failure prints the case and RapidCheck's RC_PARAMS reproduction, and the
// shrunk case is saved under fixtures/regressions/, which the GPU suite then runs every time.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "gpu_env.h"
#include "harness/property.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

Case generate_case() {
  const int64_t rows = *property::boundary_size(0, 4097, {256, 1056, 2112});
  const int64_t inter = *property::boundary_size(1, 2100, {8, 256, 2048});
  const double kept = *rc::gen::map(rc::gen::inRange(0, 9), [](int k) { return k / 8.0; });
  const int64_t step = *rc::gen::element<int64_t>(1, 16, 64);
  const double limit = *rc::gen::element(0.0, 0.5, 7.0, 10.0, 30.0);
  const int adversarial = *rc::gen::inRange(0, 2);
  const uint64_t seed = *rc::gen::inRange<uint64_t>(0, 1u << 30);
  RC_PRE(rows * inter <= (int64_t{1} << 22));  // keeps one run of the fp64 reference under ~0.1 s
  return parse_case("filtered_silu_mul(rows=" + std::to_string(rows) + ",inter=" + std::to_string(inter) +
                    ",kept=" + std::to_string(kept) + ",step=" + std::to_string(step) + ",limit=" + std::to_string(limit) +
                    ",adversarial=" + std::to_string(adversarial) + ",seed=" + std::to_string(seed) + ")");
}

TEST(FilteredSiluMulGpuProperty, MatchesReferenceOnAnyShape) {
  DSV4H_GPU_OR_SKIP(gpu);
  const bool ok = rc::check("filtered_silu_mul GPU == reference", [gpu] {
    const Case c = generate_case();
    const CaseRun run = run_case(registry().get("filtered_silu_mul"), c, gpu);
    if (!run.result.passed()) {
      const std::string path = property::save_regression(c, "filtered_silu_mul-gpu-vs-reference", run.result.report());
      RC_FAIL(run.result.report() + "\n  saved as " + path);
    }
  });
  EXPECT_TRUE(ok) << "see the counterexample and the RC_PARAMS line above";
}

}  // namespace
}  // namespace dsv4h
