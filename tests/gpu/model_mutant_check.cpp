// A model-level mutant (issue 31; model/gpu/model_mutants.cmake) run through the model's checks:
// built once per mutant with DSV4H_MODEL_MUTANT naming it, linked with the mutant's kernels (a
// component's mutant reused: its bug as the model runs it) or the model's GPU path compiled with
// the mutant. The test passes when the mutant is caught where it must be: bisection against the
// reference names the op the bug is in (its first divergent op), or the decode step's graph capture
// fails loudly, naming the capture and the runtime's stream-capture error (a host sync inside).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "gpu_env.h"
#include "harness/case_file.h"
#include "harness/model/bisect.h"
#include "model/gpu/gpu_forward.h"
#include "model/trace.h"

#ifndef DSV4H_MODEL_MUTANT
#error "DSV4H_MODEL_MUTANT names the mutant this binary is built with"
#endif

namespace dsv4h {
namespace {

struct Expectation {
  const char* mutant;
  model::DecodeMode mode;
  const char* first_op;  // nullptr: the graph capture must fail
};

// Seven requests of 5 prompt tokens and 2, 4, .. 14 decode steps: the batch shrinks within bucket 8
// (a stale row of an earlier replay then points at a live request's pages) and down to bucket 1.
const Expectation kExpectations[] = {
    {"meta_full_shape_copy", model::DecodeMode::batched_graph, "layers.0.attn.attend"},
    {"meta_padding_item", model::DecodeMode::batched_graph, nullptr},
    {"clamp_missing", model::DecodeMode::per_request, "layers.0.ffn.experts"},
    {"model_cached_translation", model::DecodeMode::batched_graph, "layers.0.attn.kv_cache"},
    {"model_mtp_zero_pad", model::DecodeMode::batched_graph, "mtp.0.embed"},
};

model::RunPlan ragged_plan(int64_t vocab) {
  model::RunPlan plan;
  plan.prompt = 5;
  uint64_t state = 0x5EED;
  for (int64_t r = 0; r < 7; ++r) {
    std::vector<int64_t> tokens;
    for (int64_t t = 0; t < plan.prompt + 2 + 2 * r; ++t) {
      uint64_t z = (state += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      tokens.push_back(static_cast<int64_t>((z ^ (z >> 31)) % static_cast<uint64_t>(vocab)));
    }
    plan.tokens.push_back(std::move(tokens));
  }
  return plan;
}

// Parameterised by the mutant's name, so that each binary's test is named after its mutant.
class ModelMutant : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelMutant, CaughtAndNamed) {
  DSV4H_GPU_OR_SKIP(gpu);
  const std::string mutant = GetParam();
  const auto it = std::find_if(std::begin(kExpectations), std::end(kExpectations),
                               [&](const Expectation& e) { return mutant == e.mutant; });
  ASSERT_NE(it, std::end(kExpectations)) << "no expectation for model mutant " << mutant;
  const model::ModelConfig config = model::load_config(fixtures_dir() + "/../model/configs/tiny.json");
  const model::ReferenceModel m(config, model::make_weights(config, 31), model::gpu_forward_reference_options());
  model::GpuForwardOptions options;
  options.decode = it->mode;
  std::string why_not;
  const std::unique_ptr<model::ModelBackend> forward = model::open_gpu_forward(m, options, why_not);
  ASSERT_TRUE(forward) << why_not;
  const model::RunPlan plan = ragged_plan(config.vocab_size);
  model::Trace candidate;
  model::TraceRecorder recorder(candidate);
  if (!it->first_op) {
    try {
      forward->run(plan, recorder);
      FAIL() << mutant << ": the decode step's capture accepted a host synchronisation";
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      std::printf("capture refused as it must: %s\n", what.c_str());
      EXPECT_NE(what.find("graph capture of the model's decode step"), std::string::npos) << what;
      EXPECT_TRUE(what.find("StreamCapture") != std::string::npos || what.find("failed at hipStreamEndCapture") != std::string::npos)
          << what;
    }
    return;
  }
  forward->run(plan, recorder);
  const BisectResult result = bisect(m, plan, candidate);
  std::string table;
  for (const std::string& line : bisect_table(result)) table += line + "\n";
  ASSERT_TRUE(result.first.has_value()) << mutant << " survived: no op over its budget\n" << table;
  EXPECT_EQ(result.ops[*result.first].op, it->first_op) << mutant << " caught at another op\n" << table;
}

INSTANTIATE_TEST_SUITE_P(Model, ModelMutant, ::testing::Values(std::string(DSV4H_MODEL_MUTANT)),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace dsv4h
