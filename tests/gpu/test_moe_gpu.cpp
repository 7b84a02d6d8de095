// Expert parallelism on one GPU, the ranks in sequence (issue 32): for R in {2, 4, 8} every rank's
// partial of the same tokens and weights is computed on this GPU (each against its reference, as
// the verify cases are), the partials are added in fp32 in rank order as an all-reduce would, and
// the sum is compared with the unpartitioned run (ranks=1) on the GPU and with its reference.
// tests/gpu/test_moe_ep_nccl.cpp does the same across GPUs, one process per rank.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "gpu_env.h"
#include "harness/compare.h"
#include "harness/verify.h"
#include "row_rel_l2.h"

namespace dsv4h {
namespace {

void ranks_add_up(GpuBackend* gpu, const std::string& sizes, uint64_t seed) {
  const Component& moe = registry().get("moe");
  const Case whole = parse_case(sizes + ",ranks=1,rank=0)", seed);
  const TensorMap inputs = moe.make_inputs(whole);
  const CaseRun single = run_case(moe, whole, gpu, inputs);
  ASSERT_TRUE(single.result.passed()) << single.result.report();
  const HostTensor& single_out = single.outputs.at("gpu").at("out");
  const HostTensor& reference_out = single.outputs.at("reference").at("out");
  const int64_t topk = whole.integer("topk"), inter = whole.integer("inter");
  for (int64_t ranks : {2, 4, 8}) {
    if (whole.integer("experts") % ranks != 0) continue;
    HostTensor sum(DType::f32, single_out.shape());
    std::vector<float> acc(static_cast<size_t>(sum.numel()), 0.f);
    for (int64_t rank = 0; rank < ranks; ++rank) {
      const Case part = parse_case(sizes + ",ranks=" + std::to_string(ranks) + ",rank=" + std::to_string(rank) + ")", seed);
      const CaseRun run = run_case(moe, part, gpu, inputs);
      EXPECT_TRUE(run.result.passed()) << run.result.report();
      const HostTensor& partial = run.outputs.at("gpu").at("out");
      for (int64_t i = 0; i < sum.numel(); ++i) acc[i] += static_cast<float>(partial.get(i));
    }
    for (int64_t i = 0; i < sum.numel(); ++i) sum.set(i, acc[i]);
    // Against the unpartitioned GPU run: the same GEMM2 rows (a row's stages do not depend on the
    // rank that computes it), summed in another order. Both are fp32 sums of the same topk + R terms
    // (the slots, the scaled partials), each within fp32_accumulated's row bound of the exact sum,
    // so within twice that of each other.
    const OutputCheck reorder{ToleranceClass::fp32_accumulated, Comparator::row_rel_l2, topk + ranks, ""};
    EXPECT_LE(testing::worst_row_rel_l2(single_out, sum), 2 * allowed_row_rel_l2(reorder)) << "R = " << ranks;
    // Against the reference: the partial's check, with the all-reduce's R terms added to K.
    const OutputCheck check{ToleranceClass::fp32_over_bf16_stage, Comparator::row_rel_l2, inter + topk + ranks, ""};
    const OutputComparison cmp = compare_output("out", reference_out, Poison::a, sum, Poison::a, check);
    EXPECT_TRUE(cmp.passed()) << "R = " << ranks << ": " << cmp.summary();
  }
}

TEST(MoeGpu, RanksInSequenceAddUpToTheUnpartitionedRun) {
  DSV4H_GPU_OR_SKIP(gpu);
  ranks_add_up(gpu, "moe(tokens=53,hidden=256,inter=64,experts=8,topk=2,padded=0.2", 17);
}

TEST(MoeGpu, RanksInSequenceAddUpWithSixExpertsPerToken) {
  DSV4H_GPU_OR_SKIP(gpu);
  ranks_add_up(gpu, "moe(tokens=100,hidden=512,inter=256,experts=16,topk=6,padded=0.1", 5);
}

}  // namespace
}  // namespace dsv4h
