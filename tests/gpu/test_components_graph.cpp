// Every registered component captured into graphs at the engine's bucket sizes from its descriptor's
// replay case, and replayed at every batch size 1..256: each replay equals the reference and, bit
// for bit, an eager launch on the same padded inputs, its outputs poisoned before every replay.
// Components add their own plans (coarse buckets, other modes) in their own graph tests.
#include <gtest/gtest.h>

#include "gpu_env.h"
#include "harness/component.h"

namespace dsv4h {
namespace {

class ComponentGraph : public ::testing::TestWithParam<std::string> {};

TEST_P(ComponentGraph, ReplayAtEveryBatchSizeUpTo256) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Component& component = registry().get(GetParam());
  ReplayOptions options;
  options.max_batch = 256;
  options.buckets = default_buckets(options.max_batch);
  const Case base = parse_case(component.replay_case);
  const ReplayResult r = gpu->graph_replay(component, base, options);
  std::printf("%s: %lld batch sizes replayed, %lld failed, budget used %.3g\n", base.str().c_str(),
              static_cast<long long>(r.batches_checked), static_cast<long long>(r.batches_failed), r.budget_used);
  EXPECT_EQ(r.batches_checked, 256);
  EXPECT_EQ(r.batches_failed, 0);
  for (const std::string& f : r.failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(ReplayCases, ComponentGraph, ::testing::ValuesIn(testing::component_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace dsv4h
