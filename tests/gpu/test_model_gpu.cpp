// The tiny model's GPU forward against the fp64 reference (issue 31): every op of every call
// bisected (harness/model/bisect.h), none over its budget, over prompts crossing a C4 block, the
// window and the first C128 entry, decode steps, a batch of two, the indexer truncating, and the
// MoE split over simulated expert-parallel ranks. Fault injection on the GPU side: one op's outputs
// perturbed as the GPU forward reports them (it writes them back and goes on from them), and
// bisection must name exactly that op. The batched decode (model/gpu/decode_graph.h): requests of
// different lengths decoded as batches that shrink as they finish (buckets 8, 4, 2, 1, partial
// batches padded), eager and graph-replayed, each bisected against the reference and the replay
// equal to the eager run. Skips without a GPU (tests/gpu/gpu_env.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "gpu_env.h"
#include "harness/case_file.h"
#include "harness/gpu/device_tensor.h"
#include "harness/model/bisect.h"
#include "model/fault_injection.h"
#include "model/gpu/gpu_forward.h"
#include "model/trace.h"

namespace dsv4h {
namespace {

struct ModelCase {
  int64_t prompt, decode, batch, index_topk;
  uint64_t seed;
  std::string str() const {
    return "model(prompt=" + std::to_string(prompt) + ",decode=" + std::to_string(decode) + ",batch=" +
           std::to_string(batch) + ",index_topk=" + std::to_string(index_topk) + ",seed=" + std::to_string(seed) + ")";
  }
};

void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.str(); }

model::ModelConfig config_of(const ModelCase& c) {
  model::ModelConfig config = model::load_config(fixtures_dir() + "/../model/configs/tiny.json");
  config.index_topk = c.index_topk;
  return config;
}

// Seeded tokens over the vocabulary (splitmix64), each request its own.
model::RunPlan plan_of(const ModelCase& c, int64_t vocab) {
  model::RunPlan plan;
  plan.prompt = c.prompt;
  for (int64_t r = 0; r < c.batch; ++r) {
    uint64_t state = c.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(r) * 0xD1B54A32D192ED03ull + 7;
    std::vector<int64_t> tokens;
    for (int64_t t = 0; t < c.prompt + c.decode; ++t) {
      uint64_t z = (state += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      tokens.push_back(static_cast<int64_t>((z ^ (z >> 31)) % static_cast<uint64_t>(vocab)));
    }
    plan.tokens.push_back(std::move(tokens));
  }
  return plan;
}

std::string table_of(const BisectResult& result) {
  std::string text;
  for (const std::string& line : bisect_table(result)) text += line + "\n";
  if (!result.aborted.empty()) text += "the teacher-forced run stopped: " + result.aborted + "\n";
  return text;
}

// The case's GPU forward (with `fault` where given, outermost) bisected against the reference;
// `plan` where given instead of the case's, `trace` where given keeps the candidate's trace.
BisectResult bisect_gpu(const ModelCase& c, const model::GpuForwardOptions& options, const std::string& fault_op = "",
                        int64_t* fault_hits = nullptr, const model::RunPlan* given = nullptr, model::Trace* trace = nullptr) {
  const model::ModelConfig config = config_of(c);
  const model::ReferenceModel m(config, model::make_weights(config, c.seed), model::gpu_forward_reference_options());
  std::string why_not;
  const std::unique_ptr<model::ModelBackend> gpu = model::open_gpu_forward(m, options, why_not);
  if (!gpu) throw std::runtime_error("no GPU forward: " + why_not);
  const model::RunPlan plan = given ? *given : plan_of(c, config.vocab_size);
  model::Trace own;
  model::Trace& candidate = trace ? *trace : own;
  model::TraceRecorder recorder(candidate);
  if (fault_op.empty()) {
    gpu->run(plan, recorder);
  } else {
    model::FaultInjection fault(fault_op, 0.25, &recorder);
    gpu->run(plan, fault);
    if (fault_hits) *fault_hits = fault.hits();
  }
  return bisect(m, plan, candidate);
}

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

// An output the GPU forward cannot write back (fp8 codes with scales) is an error naming the op,
// never a silently unperturbed run.
TEST(ModelGpuBisection, AnUnwritableOutputIsAnError) {
  DSV4H_GPU_OR_SKIP(gpu);
  try {
    bisect_gpu({9, 1, 1, 512, 8}, {}, "layers.1.attn.indexer.q");
    FAIL() << "a changed indexer.q went unnoticed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.1.attn.indexer.q"), std::string::npos) << e.what();
  }
}

// Requests of prompt c.prompt and c.decode + 2 * r decode steps, r = 0 .. c.batch - 1, so that the
// batch shrinks as they finish (the rows after a finished request move up).
model::RunPlan ragged_plan_of(const ModelCase& c, int64_t vocab) {
  model::RunPlan plan = plan_of({c.prompt, c.decode + 2 * (c.batch - 1), c.batch, c.index_topk, c.seed}, vocab);
  for (int64_t r = 0; r < c.batch; ++r) plan.tokens[static_cast<size_t>(r)].resize(static_cast<size_t>(c.prompt + c.decode + 2 * r));
  return plan;
}

model::GpuForwardOptions batched(model::DecodeMode mode) {
  model::GpuForwardOptions options;
  options.decode = mode;
  options.max_batch = 8;
  return options;
}

// Prompts ending before and after a C4 block and past C128's first entry; 7 requests: buckets 8,
// 4, 2 and 1 all replayed, most of them partly filled.
const ModelCase kBatchedCases[] = {{5, 2, 7, 512, 11}, {126, 1, 3, 512, 12}, {64, 3, 5, 16, 13}};

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
              << "MISMATCH: " << op << "." << a->outputs[k].first << " of request " << r << " step " << s
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
