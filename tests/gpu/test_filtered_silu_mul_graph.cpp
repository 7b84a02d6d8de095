// filtered_silu_mul captured into a graph at the engine's bucket sizes and replayed at every batch
// size 1..256: the replay equals the reference and, bit for bit, an eager launch on the same padded
// inputs; padding rows (expert id -1) stay unwritten.
#include <gtest/gtest.h>

#include "gpu_env.h"
#include "harness/component.h"

namespace dsv4h {
namespace {

TEST(FilteredSiluMulGpuGraph, ReplayAtEveryBatchSizeUpTo256) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Component& component = registry().get("filtered_silu_mul");
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

}  // namespace
}  // namespace dsv4h
