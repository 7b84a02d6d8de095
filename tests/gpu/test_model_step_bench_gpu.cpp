// The GPU forward's entry for benchmarks (model/gpu/step_bench.h; tests/bench/bench_model.cpp)
// runs here before the bench phase times it, on the tiny config: the whole model's decode step
// over a batch made from one prefilled request, eager and replayed, then a request's prefill; and
// one layer with its weights made on the device (the tiny config cut to one C4 layer, standing in
// for the Flash layer's 13 GB). A replay does what the eager step does: the same routing, every
// row's experts distinct and in range.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "gpu_env.h"
#include "harness/case_file.h"
#include "model/config.h"
#include "model/gpu/gpu_forward.h"
#include "model/gpu/step_bench.h"
#include "model/weights.h"

namespace dsv4h {
namespace {

using model::gpu::StepBench;

model::ModelConfig tiny() { return model::load_config(fixtures_dir() + "/../model/configs/tiny.json"); }

// Eager and replayed steps route alike, each row to k distinct experts of the config's; the
// routing is poisoned before each, since both write the same buffers.
void expect_replay_routes_as_eager(StepBench& b, const model::ModelConfig& c, int64_t rows, const std::string& route_op) {
  b.poison(rows, route_op);
  b.eager(rows);
  const std::vector<int32_t> eager = b.routed(rows, route_op);
  b.poison(rows, route_op);
  b.replay(rows);
  const std::vector<int32_t> replayed = b.routed(rows, route_op);
  EXPECT_EQ(eager, replayed) << route_op;
  ASSERT_EQ(static_cast<int64_t>(eager.size()), rows * c.n_activated_experts);
  for (int64_t r = 0; r < rows; ++r) {
    const auto row = eager.begin() + r * c.n_activated_experts;
    const std::set<int32_t> distinct(row, row + c.n_activated_experts);
    EXPECT_EQ(static_cast<int64_t>(distinct.size()), c.n_activated_experts) << "row " << r;
    EXPECT_GE(*distinct.begin(), 0);
    EXPECT_LT(*distinct.rbegin(), c.n_routed_experts);
  }
  size_t nodes = 0;
  DSV4H_HIP_CHECK(hipGraphGetNodes(b.graph(rows), nullptr, &nodes));
  EXPECT_GT(nodes, 20u);
}

TEST(ModelStepBench, WholeModelDecodeAndPrefill) {
  DSV4H_GPU_OR_SKIP(gpu);
  const model::ModelConfig c = tiny();
  const model::ReferenceModel m(c, model::make_weights(c, 3), model::gpu_forward_reference_options());
  const std::unique_ptr<StepBench> b = StepBench::whole_model(m);
  b->prefill_batch(8, 40, 3);
  for (int64_t rows : {1, 8}) expect_replay_routes_as_eager(*b, c, rows, "layers.1.ffn.route");
  b->new_request(40);
  std::vector<int64_t> prompt(40);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int64_t>((i * 37 + 5) % c.vocab_size);
  b->prefill(prompt);
  DSV4H_HIP_CHECK(hipStreamSynchronize(b->stream()));
}

TEST(ModelStepBench, OneLayerWithDeviceWeights) {
  DSV4H_GPU_OR_SKIP(gpu);
  model::ModelConfig c = tiny();
  c.n_layers = 1;
  c.compress_ratios = {4, 0};
  c.n_hash_layers = 0;
  const std::unique_ptr<StepBench> b = StepBench::one_layer(c, 11);
  b->prefill_batch(4, 40, 11);
  for (int64_t rows : {1, 4}) expect_replay_routes_as_eager(*b, c, rows, "layers.0.ffn.route");
}

}  // namespace
}  // namespace dsv4h
