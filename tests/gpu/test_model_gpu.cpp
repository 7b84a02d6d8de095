// The tiny model's GPU forward against the fp64 reference (issue 31): every op of every call
// bisected (harness/model/bisect.h), none over its budget, over prompts crossing a C4 block, the
// window and the first C128 entry, decode steps, a batch of two, the indexer truncating, and the
// MoE split over simulated expert-parallel ranks. Fault injection on the GPU side: one op's outputs
// perturbed as the GPU forward reports them (it writes them back and goes on from them), and
// bisection must name exactly that op. Skips without a GPU (tests/gpu/gpu_env.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "gpu_env.h"
#include "model_gpu_run.h"

namespace dsv4h {
namespace {

using namespace model_gpu_test;

class ModelGpu : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ModelGpu, EveryOpWithinItsBudget) {
  DSV4H_GPU_OR_SKIP(gpu);
  const ModelCase c = GetParam();
  const BisectResult result = bisect_gpu(c, {});
  EXPECT_TRUE(result.passed()) << c.str() << ": the GPU forward crosses a budget\n" << table_of(result);
  EXPECT_FALSE(result.ops.empty());
}

std::string case_name(const ::testing::TestParamInfo<ModelCase>& info) {
  const ModelCase& c = info.param;
  return "prompt" + std::to_string(c.prompt) + "_decode" + std::to_string(c.decode) + "_batch" + std::to_string(c.batch) +
         "_topk" + std::to_string(c.index_topk);
}

// Small: the one case ci/gpu-suite's sanitize phase runs under compute-sanitizer (each case is
// hundreds of launches and an fp64 bisection, minutes under the tools); Cases: the others.
INSTANTIATE_TEST_SUITE_P(Small, ModelGpu,
                         ::testing::Values(ModelCase{5, 4, 2, 512, 2}),  // a batch of two, a prompt ending inside a C4 block
                         case_name);
INSTANTIATE_TEST_SUITE_P(
    Cases, ModelGpu,
    ::testing::Values(ModelCase{1, 8, 1, 512, 1},     // decode from the first token: C4 entries by the state machine
                      ModelCase{64, 6, 1, 16, 3},     // the indexer truncating (index_topk 16) from position 67
                      ModelCase{126, 4, 1, 512, 4},   // the window fills; C128's first entry by decode
                      ModelCase{131, 2, 2, 512, 5}),  // a prompt past 128 and the window: C128 in the prefill
    case_name);

// Expert parallel on one GPU: the MoE as R ranks, each its own experts with the rest filtered, the
// partials summed; the experts op stays within its budget of the reference's unpartitioned MoE.
TEST(ModelGpuExpertParallel, RanksSumToTheWholeMoe) {
  DSV4H_GPU_OR_SKIP(gpu);
  for (int64_t ranks : {2, 4, 8}) {
    model::GpuForwardOptions options;
    options.expert_ranks = ranks;
    const ModelCase c{9, 3, 1, 512, 6};
    const BisectResult result = bisect_gpu(c, options);
    EXPECT_TRUE(result.passed()) << ranks << " ranks, " << c.str() << "\n" << table_of(result);
  }
}

// A fault in one op of one layer, injected into what the GPU forward reports and writes back:
// bisection names exactly that op.
TEST(ModelGpuBisection, NamesTheInjectedOp) {
  DSV4H_GPU_OR_SKIP(gpu);
  const ModelCase c{9, 3, 2, 512, 7};
  for (const std::string op : {"layers.2.attn.wo_a", "layers.1.attn.attend", "layers.3.ffn.route", "layers.1.attn.kv_cache",
                               "mtp.0.ffn.experts"}) {
    int64_t hits = 0;
    const BisectResult result = bisect_gpu(c, {}, op, &hits);
    EXPECT_GT(hits, 0) << op << " never ran";
    ASSERT_TRUE(result.first.has_value()) << op << " perturbed, and no op over budget\n" << table_of(result);
    EXPECT_EQ(result.ops[*result.first].op, op) << table_of(result);
  }
}

}  // namespace
}  // namespace dsv4h
