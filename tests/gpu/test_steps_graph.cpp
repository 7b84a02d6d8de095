// Composed steps and consistency relations on the GPU. The MTP draft step (attn_metadata then
// mtp_expand over the same device buffers) against its stages' references under two poisons,
// captured as one graph at the engine's buckets (and coarse ones, where a small batch replays in a
// graph of 8) and replayed at every batch size up to 64, and its batch relations. Each component's
// relation cases on the GPU, after its whole case against the reference: a relation compares GPU
// runs with each other, which a kernel that writes nothing would satisfy (the noop mutant must
// fail every test). Test names follow the components' gpu_tests filters, so that a component's
// mutants are judged on its relations too.
#include <gtest/gtest.h>

#include <vector>

#include "gpu_env.h"
#include "harness/component.h"
#include "harness/relation.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

void expect_replay_passes(GpuBackend& gpu, const std::vector<int64_t>& buckets) {
  const Component& step = registry().get("mtp_draft_step");
  ReplayOptions options;
  options.max_batch = 64;
  options.buckets = buckets.empty() ? default_buckets(options.max_batch) : buckets;
  const ReplayResult r = gpu.graph_replay(step, parse_case(step.replay_case), options);
  EXPECT_EQ(r.batches_checked, options.max_batch);
  EXPECT_EQ(r.batches_failed, 0);
  for (const std::string& f : r.failures) ADD_FAILURE() << f;
}

void expect_relations_hold(GpuBackend* gpu, const std::string& name) {
  const Component& component = registry().get(name);
  ASSERT_FALSE(component.relation_cases.empty()) << name;
  for (const std::string& text : component.relation_cases)
    for (uint64_t seed : {1, 2}) {
      const RelationCase rc = parse_relation_case(text, seed);
      const CaseRun whole = run_case(component, rc.subject, gpu);
      EXPECT_TRUE(whole.result.passed()) << whole.result.report();
      const CaseResult r = run_relation(component, rc, gpu);
      EXPECT_TRUE(r.passed()) << r.report();
    }
}

TEST(MtpDraftStep, CasesMatchTheReferenceUnderTwoPoisons) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Component& step = registry().get("mtp_draft_step");
  for (const std::string& text : step.verify_cases)
    for (uint64_t seed : {1, 2}) {
      const CaseRun run = run_case(step, parse_case(text, seed), gpu);
      EXPECT_TRUE(run.result.passed()) << run.result.report();
    }
}

TEST(MtpDraftStep, OneGraphReplayedAtEveryBatchSizeTo64) {
  DSV4H_GPU_OR_SKIP(gpu);
  expect_replay_passes(*gpu, {});
}

TEST(MtpDraftStep, OneGraphReplayedInCoarseBuckets) {
  DSV4H_GPU_OR_SKIP(gpu);
  expect_replay_passes(*gpu, {8, 64});
}

TEST(MtpDraftStep, RelationsHoldOnTheGpu) {
  DSV4H_GPU_OR_SKIP(gpu);
  expect_relations_hold(gpu, "mtp_draft_step");
}

TEST(FilteredSiluMulRelations, HoldOnTheGpu) {
  DSV4H_GPU_OR_SKIP(gpu);
  expect_relations_hold(gpu, "filtered_silu_mul");
}

TEST(MtpExpandRelations, HoldOnTheGpu) {
  DSV4H_GPU_OR_SKIP(gpu);
  expect_relations_hold(gpu, "mtp_expand");
}

TEST(AttnMetadataRelations, HoldOnTheGpu) {
  DSV4H_GPU_OR_SKIP(gpu);
  expect_relations_hold(gpu, "attn_metadata");
}

TEST(MemoryPoolRelations, HoldOnTheGpu) {
  DSV4H_GPU_OR_SKIP(gpu);
  expect_relations_hold(gpu, "memory_pool");
}

}  // namespace
}  // namespace dsv4h
