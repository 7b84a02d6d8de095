// memory_pool bad input on the GPU path: an out-of-range location or SWA page id, two rows on one
// slot, a layer or ratio the pools do not have, each a clear error naming the value, and nothing
// written (the pools keep their poison).
#include <gtest/gtest.h>

#include <stdexcept>

#include "gpu_env.h"
#include "harness/poison.h"
#include "harness/verify.h"
#include "memory_pool_device.h"

namespace dsv4h {
namespace {

const Component& component() { return registry().get("memory_pool"); }
const char* kCase = "memory_pool(tokens=8,full_pages=32,swa_pages=16)";

void expect_bad_input(const std::string& input, int64_t index, int32_t value, const std::string& message) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Case c = parse_case(kCase, 5);
  TensorMap inputs = component().make_inputs(c);
  inputs.at(input).data<int32_t>()[index] = value;
  const CaseRun run = run_case(component(), c, gpu, inputs);
  EXPECT_EQ(run.result.status, CaseStatus::bad_input) << run.result.report();
  EXPECT_NE(run.result.message.find(message), std::string::npos) << run.result.message;
}

TEST(MemoryPoolGpuBadInput, LocationOutsideTheFullPool) {
  expect_bad_input("out_cache_loc", 3, 32 * 256, "out_cache_loc[3] = 8192 is outside the full pool");
}
TEST(MemoryPoolGpuBadInput, NegativeLocationOtherThanMinusOne) { expect_bad_input("out_cache_loc", 1, -2, "out_cache_loc[1] = -2"); }
TEST(MemoryPoolGpuBadInput, SwaPageOutsideThePool) {
  expect_bad_input("full_to_swa", 700, 16 * 256 + 5, "full_to_swa[700] = 4101 (swa page 16) is outside the swa pool of 16 pages");
}

TEST(MemoryPoolGpuBadInput, TwoRowsOnOneSlot) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Case c = parse_case("memory_pool(tokens=8,full_pages=32,swa_pages=16,invalid=0)", 5);
  TensorMap inputs = component().make_inputs(c);
  int32_t* loc = inputs.at("out_cache_loc").data<int32_t>();
  loc[0] = loc[1];
  const CaseRun run = run_case(component(), c, gpu, inputs);
  EXPECT_EQ(run.result.status, CaseStatus::bad_input) << run.result.report();
  EXPECT_NE(run.result.message.find("out_cache_loc rows 0 and 1 both hold " + std::to_string(loc[1])), std::string::npos)
      << run.result.message;
}

// The launch wrapper checks every layer argument before its first launch.
TEST(MemoryPoolGpuBadInput, LayerArgumentsOutsideThePoolsWriteNothing) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Case c = parse_case(kCase, 5);
  const TensorMap host_inputs = component().make_inputs(c);
  DeviceTensorMap inputs = DeviceTensorMap::upload(host_inputs);
  TensorMap poisoned = component().make_outputs(c);
  fill_poison(poisoned, Poison::a);
  DeviceTensorMap outputs = DeviceTensorMap::upload(poisoned);
  const KvPoolSet pools = memory_pool_device_pools(c, outputs, nullptr);
  const KvStepLocations step = testing::pool_step(c, inputs, outputs, 0, 8);
  KvLayerStore layer = testing::pool_layer(c, inputs, 1, 0);
  layer.indexer_layer = 2;  // the tiny model's 4 layers have 2 indexer buffers
  try {
    launch_kv_store_layer(pools, step, layer, nullptr);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("indexer pool: layer 2 outside [0, 2)"), std::string::npos) << e.what();
  }
  layer = testing::pool_layer(c, inputs, 1, 0);
  layer.ratio = 5;
  EXPECT_THROW(launch_kv_store_layer(pools, step, layer, nullptr), std::invalid_argument);
  DSV4H_HIP_CHECK(hipStreamSynchronize(nullptr));
  const TensorMap after = outputs.download();
  for (const auto& [name, t] : after)
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_TRUE(is_poison(t, i, Poison::a)) << name << " written at " << i;
  // The control: the same step with the layer as it was does write, so "nothing written" above
  // was the refusal's doing, not a store that could not land.
  // (With the step's stale translations as the cache only the pool_cached_loc mutant reads, as the
  // component's launcher passes them.)
  launch_kv_translate(step, nullptr);
  launch_kv_store_layer(memory_pool_device_pools(c, outputs, inputs.data<int32_t>("stale_swa_loc")), step,
                        testing::pool_layer(c, inputs, 1, 0), nullptr);
  DSV4H_HIP_CHECK(hipStreamSynchronize(nullptr));
  const HostTensor swa = outputs.download().at("swa_pool");
  int64_t written = 0;
  for (int64_t i = 0; i < swa.numel(); ++i) written += !is_poison(swa, i, Poison::a);
  EXPECT_GT(written, 0) << "the valid layer stored nothing";
}

}  // namespace
}  // namespace dsv4h
