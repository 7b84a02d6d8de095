// A model-level mutant (issue 31; model/gpu/model_mutants.cmake) run through the model's checks:
// built once per mutant with DSV4H_MODEL_MUTANT naming it, linked with the mutant's kernels (a
// component's mutant reused: its bug as the model runs it) or the model's GPU path compiled with
// the mutant. The test passes when the mutant is caught where it must be: bisection against the
// reference names the op the bug is in (its first divergent op), or the decode step's graph capture
// fails loudly, naming the capture and the runtime's stream-capture error (a host sync inside).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "gpu_env.h"
#include "harness/model/bisect.h"
#include "model_gpu_run.h"

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

// Parameterised by the mutant's name, so that each binary's test is named after its mutant.
class ModelMutant : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelMutant, CaughtAndNamed) {
  DSV4H_GPU_OR_SKIP(gpu);
  const std::string mutant = GetParam();
  const auto it = std::find_if(std::begin(kExpectations), std::end(kExpectations),
                               [&](const Expectation& e) { return mutant == e.mutant; });
  ASSERT_NE(it, std::end(kExpectations)) << "no expectation for model mutant " << mutant;
  model::GpuForwardOptions options;
  options.decode = it->mode;
  // Seven requests of prompt 5 and 2, 4, .. 14 decode steps: the batch shrinks from 7 to 1.
  const model_gpu_test::ModelCase c{5, 2, 7, 512, 31};
  const model::RunPlan plan = model_gpu_test::ragged_plan_of(c, model_gpu_test::config_of(c).vocab_size);
  if (!it->first_op) {
    try {
      model_gpu_test::bisect_gpu(c, options, "", nullptr, &plan);
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
  const BisectResult result = model_gpu_test::bisect_gpu(c, options, "", nullptr, &plan);
  ASSERT_TRUE(result.first.has_value()) << mutant << " survived: no op over its budget\n" << model_gpu_test::table_of(result);
  EXPECT_EQ(result.ops[*result.first].op, it->first_op) << mutant << " caught at another op\n" << model_gpu_test::table_of(result);
}

INSTANTIATE_TEST_SUITE_P(Model, ModelMutant, ::testing::Values(std::string(DSV4H_MODEL_MUTANT)),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace dsv4h
