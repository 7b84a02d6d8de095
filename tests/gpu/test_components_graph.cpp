// Every registered component captured into graphs at the engine's bucket sizes from its descriptor's
// replay case, and replayed at every batch size 1..256: each replay equals the reference and, bit
// for bit, an eager launch on the same padded inputs, its outputs poisoned before every replay.
// The batch sizes are split into tests of 32 (each captures only the buckets its batches use), so
// that a component's replays spread over gtest shards: whole, sparse attention's took 170 to 220 s
// in one process on an H100, the GPU suite's longest step.
// Components add their own plans (coarse buckets, other modes) in their own graph tests.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "gpu_env.h"
#include "harness/component.h"

namespace dsv4h {
namespace {

constexpr int64_t kMaxBatch = 256, kBatchesPerTest = 32;

struct ReplayPart {
  std::string component;
  int64_t first_batch, last_batch;
};
void PrintTo(const ReplayPart& p, std::ostream* os) {
  *os << p.component << " at batch sizes " << p.first_batch << ".." << p.last_batch;
}

std::vector<ReplayPart> replay_parts() {
  std::vector<ReplayPart> parts;
  for (const std::string& name : testing::component_names())
    for (int64_t first = 1; first <= kMaxBatch; first += kBatchesPerTest)
      parts.push_back({name, first, first + kBatchesPerTest - 1});
  return parts;
}

class ComponentGraph : public ::testing::TestWithParam<ReplayPart> {};

TEST_P(ComponentGraph, ReplayAtEveryBatchSize) {
  DSV4H_GPU_OR_SKIP(gpu);
  const ReplayPart& part = GetParam();
  const Component& component = registry().get(part.component);
  ReplayOptions options;
  options.min_batch = part.first_batch;
  options.max_batch = part.last_batch;
  options.buckets = default_buckets(kMaxBatch);
  const Case base = parse_case(component.replay_case);
  const ReplayResult r = gpu->graph_replay(component, base, options);
  std::printf("%s: %lld batch sizes replayed (%lld..%lld), %lld failed, budget used %.3g\n", base.str().c_str(),
              static_cast<long long>(r.batches_checked), static_cast<long long>(part.first_batch),
              static_cast<long long>(part.last_batch), static_cast<long long>(r.batches_failed), r.budget_used);
  EXPECT_EQ(r.batches_checked, part.last_batch - part.first_batch + 1);
  EXPECT_EQ(r.batches_failed, 0);
  for (const std::string& f : r.failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(ReplayCases, ComponentGraph, ::testing::ValuesIn(replay_parts()),
                         [](const ::testing::TestParamInfo<ReplayPart>& info) {
                           return info.param.component + "_bs" + std::to_string(info.param.first_batch) + "_" +
                                  std::to_string(info.param.last_batch);
                         });

}  // namespace
}  // namespace dsv4h
