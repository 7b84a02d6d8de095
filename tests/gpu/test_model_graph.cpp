// The GPU forward's batched decode (model/gpu/decode_graph.h, issue 31): requests of different
// lengths decoded as batches that shrink as they finish (buckets 8, 4, 2 and 1, partial batches
// padded), eager and replayed from the graphs captured per bucket, each bisected against the
// reference, the replay equal to the eager launches, a host sync inside the step failing its
// capture loudly. Linked into test_gpu_graph only: these pass with kernels that do nothing too
// (the capture, the refusal, replay against eager), so the mutant binaries, whose noop must fail
// every test, leave them out (as test_graph_capture_guard.cpp). Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <utility>

#include "gpu_env.h"
#include "harness/compare.h"
#include "harness/gpu/device_tensor.h"
#include "model_gpu_run.h"

namespace dsv4h {
namespace {

using namespace model_gpu_test;

model::GpuForwardOptions batched(model::DecodeMode mode) {
  model::GpuForwardOptions options;
  options.decode = mode;
  options.max_batch = 8;
  return options;
}

// Prompts ending before and after a C4 block and past C128's first entry, the indexer truncating;
// 8 requests: every batch from 8 down to 1 replayed (buckets 8, 4, 2 and 1, full and partly filled).
const ModelCase kBatchedCases[] = {{5, 2, 8, 512, 11}, {126, 1, 3, 512, 12}, {64, 3, 5, 16, 13}};

TEST(ModelGraphGpu, BatchedDecodeWithinItsBudgets) {
  DSV4H_GPU_OR_SKIP(gpu);
  for (const ModelCase& c : kBatchedCases)
    for (const model::DecodeMode mode : {model::DecodeMode::batched_eager, model::DecodeMode::batched_graph}) {
      const model::RunPlan plan = ragged_plan_of(c, config_of(c).vocab_size);
      const BisectResult result = bisect_gpu(c, batched(mode), "", nullptr, &plan);
      EXPECT_TRUE(result.passed()) << c.str() << (mode == model::DecodeMode::batched_graph ? " replayed" : " eager")
                                   << ": the batched decode crosses a budget\n" << table_of(result);
    }
}

// The replayed step is the eager step: the same kernels on the same buffers, bit for bit.
TEST(ModelGraphGpu, ReplayEqualsEagerLaunches) {
  DSV4H_GPU_OR_SKIP(gpu);
  const ModelCase c = kBatchedCases[0];
  const model::RunPlan plan = ragged_plan_of(c, config_of(c).vocab_size);
  model::Trace eager, replayed;
  bisect_gpu(c, batched(model::DecodeMode::batched_eager), "", nullptr, &plan, &eager);
  bisect_gpu(c, batched(model::DecodeMode::batched_graph), "", nullptr, &plan, &replayed);
  int64_t compared = 0;
  for (int64_t r = 0; r < c.batch; ++r)
    for (int64_t s = 1; s < plan.steps(r); ++s)
      for (const std::string& op : eager.ops()) {
        const model::OpRecord* a = eager.find(r, s, op);
        const model::OpRecord* b = replayed.find(r, s, op);
        ASSERT_EQ(a == nullptr, b == nullptr) << op << " of request " << r << " step " << s << " in one run only";
        if (!a) continue;
        for (size_t k = 0; k < a->outputs.size(); ++k) {
          const model::RowMatrix& x = a->outputs[k].second;
          const model::RowMatrix& y = b->outputs[k].second;
          ASSERT_TRUE(x.rows() == y.rows() && x.cols() == y.cols() && x == y)
              << kMismatchMark << ": " << op << "." << a->outputs[k].first << " of request " << r << " step " << s
              << ": the replay differs from the eager launches";
          ++compared;
        }
      }
  EXPECT_GT(compared, 0);
}

// The capture guard (harness/gpu/device_tensor.h's CaptureScope, a global-mode capture): a host
// synchronisation, a synchronous copy or an allocation inside the decode step fails its capture
// loudly, naming the capture and the cause, never a graph that silently replays less.
TEST(ModelGraphGpu, CaptureFailsOnAHostSyncInsideTheStep) {
  DSV4H_GPU_OR_SKIP(gpu);
  const std::vector<std::pair<std::string, std::function<void(void*)>>> offences = {
      {"StreamCapture", [](void* s) { DSV4H_HIP_CHECK(hipStreamSynchronize(static_cast<hipStream_t>(s))); }},
      {"StreamCapture", [](void*) {
         static DeviceBuffer scalar(4);  // allocated outside the capture (the first, eager run)
         int32_t host = 0;               // the .item() of review finding 1
         DSV4H_HIP_CHECK(hipMemcpy(&host, scalar.data(), 4, hipMemcpyDeviceToHost));
       }},
      {"hipMalloc", [](void*) { DeviceBuffer scratch(1024); }},
  };
  for (const auto& [cause, offence] : offences) {
    model::GpuForwardOptions options = batched(model::DecodeMode::batched_graph);
    options.in_step = offence;
    try {
      bisect_gpu({5, 1, 2, 512, 15}, options);
      FAIL() << "the decode step's capture accepted an offence (" << cause << ")";
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      std::printf("capture refused as it must: %s\n", what.c_str());
      EXPECT_NE(what.find("graph capture of the model's decode step"), std::string::npos) << what;
      EXPECT_TRUE(what.find(cause) != std::string::npos || what.find("failed at hipStreamEndCapture") != std::string::npos) << what;
    }
  }
}

// More requests than the largest bucket is refused, naming max_batch.
TEST(ModelGraphGpu, MoreRequestsThanTheLargestBucketIsAnError) {
  DSV4H_GPU_OR_SKIP(gpu);
  model::GpuForwardOptions options = batched(model::DecodeMode::batched_graph);
  options.max_batch = 2;
  try {
    bisect_gpu({5, 1, 3, 512, 14}, options);
    FAIL() << "3 requests ran in buckets of at most 2";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("max_batch"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dsv4h
