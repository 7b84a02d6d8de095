// memory_pool's step (translation + every layer's stores) captured at the engine's bucket sizes and
// replayed at every batch size 1..256, as test_components_graph.cpp replays its replay case, with
// the layers storing in descending order, so that no store can lean on layer 0 having run first:
// the replay equals the reference and an eager launch on the same padded inputs; padding rows (out
// location 0, length 1) write nothing, the sink included.
#include <gtest/gtest.h>

#include "gpu_env.h"
#include "harness/component.h"

namespace dsv4h {
namespace {

void replay(const Case& base) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Component& component = registry().get("memory_pool");
  ReplayOptions options;
  options.max_batch = 256;
  options.buckets = default_buckets(options.max_batch);
  const ReplayResult r = gpu->graph_replay(component, base, options);
  std::printf("%s: %lld batch sizes replayed, %lld failed\n", base.str().c_str(),
              static_cast<long long>(r.batches_checked), static_cast<long long>(r.batches_failed));
  EXPECT_EQ(r.batches_checked, 256);
  EXPECT_EQ(r.batches_failed, 0);
  for (const std::string& f : r.failures) ADD_FAILURE() << f;
}

TEST(MemoryPoolGpuGraph, ReplayWithLayersStoringInDescendingOrder) {
  replay(parse_case(registry().get("memory_pool").replay_case).with("order", "1"));
}

}  // namespace
}  // namespace dsv4h
