// The composed C4 decode step on the GPU, beside the generic tests (its verify cases under two
// poisons, one graph a bucket replayed at every batch size 1..256 with padding poisoned): one graph
// of 8 and one of 64 replaying every smaller batch (coarse buckets, most rows padding), and its batch
// relations, each after its whole case against the reference (a relation compares GPU runs with each
// other, which a kernel writing nothing would satisfy).
#include <gtest/gtest.h>

#include "gpu_env.h"
#include "harness/component.h"
#include "harness/relation.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

const Component& step() { return registry().get("c4_decode_step"); }

TEST(C4DecodeStep, OneGraphReplayedInCoarseBuckets) {
  DSV4H_GPU_OR_SKIP(gpu);
  ReplayOptions options;
  options.max_batch = 64;
  options.buckets = {8, 64};
  const ReplayResult r = gpu->graph_replay(step(), parse_case(step().replay_case), options);
  EXPECT_EQ(r.batches_checked, options.max_batch);
  EXPECT_EQ(r.batches_failed, 0);
  for (const std::string& f : r.failures) ADD_FAILURE() << f;
}

TEST(C4DecodeStep, RelationsHoldOnTheGpu) {
  DSV4H_GPU_OR_SKIP(gpu);
  ASSERT_FALSE(step().relation_cases.empty());
  for (const std::string& text : step().relation_cases)
    for (uint64_t seed : {1, 2}) {
      const RelationCase rc = parse_relation_case(text, seed);
      const CaseRun whole = run_case(step(), rc.subject, gpu);
      EXPECT_TRUE(whole.result.passed()) << whole.result.report();
      const CaseResult r = run_relation(step(), rc, gpu);
      EXPECT_TRUE(r.passed()) << r.report();
    }
}

}  // namespace
}  // namespace dsv4h
