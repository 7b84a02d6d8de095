// memory_pool on the GPU beside its verify cases and golden fixtures (test_components_gpu.cpp): two
// batches whose layer stores interleave (the review's cached_loc failure), and the gather-and-unpack
// kernels reading back what a step stored, bit for bit against the CPU unpack.
#include <gtest/gtest.h>

#include <cstring>

#include "gpu_env.h"
#include "harness/poison.h"
#include "harness/verify.h"
#include "memory_pool_device.h"
#include "reference/kv_cache_indexer.h"
#include "reference/kv_cache_model1.h"
#include "reference/kv_pool.h"

namespace dsv4h {
namespace {

const Component& component() { return registry().get("memory_pool"); }

void expect_outputs_equal(const TensorMap& expected, const TensorMap& got, const std::string& where) {
  for (const auto& [name, e] : expected) {
    const OutputComparison cmp = compare_output(name, e, Poison::a, got.at(name), Poison::a, OutputCheck{});
    EXPECT_TRUE(cmp.passed()) << where << ": " << cmp.summary();
  }
}

// Batches A and B translate, then store layer by layer in turn (A0 B0 A1 B1 ...), as two forwards
// in flight on one pool would. Each layer must use its own batch's translation.
TEST(MemoryPoolGpuSteps, InterleavedBatchesStoreToTheirOwnSlots) {
  DSV4H_GPU_OR_SKIP(gpu);
  for (uint64_t seed : {1, 2, 3}) {
    const Case c = parse_case("memory_pool(tokens=24,per_request=3,layers=5,full_pages=64,swa_pages=40,invalid=0)", seed);
    std::printf("case %s (seed %llu): batches rows [0, 12) and [12, 24)\n", c.str().c_str(), static_cast<unsigned long long>(seed));
    const CaseRun ref = run_case(component(), c, nullptr);
    ASSERT_TRUE(ref.result.passed()) << ref.result.report();
    DeviceTensorMap inputs = DeviceTensorMap::upload(ref.inputs);
    TensorMap poisoned = component().make_outputs(c);
    fill_poison(poisoned, Poison::a);
    DeviceTensorMap outputs = DeviceTensorMap::upload(poisoned);
    const KvPoolSet pools = memory_pool_device_pools(c, outputs, inputs.data<int32_t>("stale_swa_loc"));
    const KvStepLocations a = testing::pool_step(c, inputs, outputs, 0, 12), b = testing::pool_step(c, inputs, outputs, 12, 24);
    launch_kv_translate(a, nullptr);
    launch_kv_translate(b, nullptr);
    for (int layer = 0; layer < 5; ++layer) {
      launch_kv_store_layer(pools, a, testing::pool_layer(c, inputs, layer, 0), nullptr);
      launch_kv_store_layer(pools, b, testing::pool_layer(c, inputs, layer, 12), nullptr);
    }
    DSV4H_HIP_CHECK(hipStreamSynchronize(nullptr));
    expect_outputs_equal(ref.outputs.at("reference"), outputs.download(), "seed " + std::to_string(seed));
  }
}

// A step stored on the GPU, then every stored entry gathered back: latents (swa and c4 of layer 1,
// c128 of layer 2) against the CPU unpack of the reference pool, keys likewise.
TEST(MemoryPoolGpuSteps, GatherReadsBackEveryStoredEntry) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Case c = parse_case("memory_pool(tokens=300,per_request=150,layers=3,history=700,full_pages=16,swa_pages=8,invalid=0)", 4);
  std::printf("case %s (seed 4)\n", c.str().c_str());
  const MemoryPoolSizes s = memory_pool_sizes(c);
  const CaseRun ref = run_case(component(), c, nullptr);
  ASSERT_TRUE(ref.result.passed()) << ref.result.report();
  const TensorMap& expected = ref.outputs.at("reference");
  DeviceTensorMap inputs = DeviceTensorMap::upload(ref.inputs);
  TensorMap poisoned = component().make_outputs(c);
  fill_poison(poisoned, Poison::a);
  DeviceTensorMap outputs = DeviceTensorMap::upload(poisoned);
  launch_memory_pool_case(c, inputs, outputs, nullptr);
  const KvPoolSet pools = memory_pool_device_pools(c, outputs, nullptr);

  using reference::PoolKind;
  struct Read { const char* pool; const char* locs; PoolKind kind; const KvPoolBuffer* buffer; int layer; };
  const Read reads[] = {{"swa_pool", "swa_out_loc", PoolKind::swa, &pools.swa, 1},
                        {"c4_pool", "c4_out_loc", PoolKind::c4, &pools.c4, 0},
                        {"c128_pool", "c128_out_loc", PoolKind::c128, &pools.c128, 0},
                        {"indexer_pool", "c4_out_loc", PoolKind::indexer, &pools.indexer, 0}};
  for (const Read& r : reads) {
    std::vector<int32_t> slots;
    for (int64_t i = 0; i < s.tokens; ++i)
      if (expected.at(r.locs).data<int32_t>()[i] > 0) slots.push_back(expected.at(r.locs).data<int32_t>()[i]);
    ASSERT_FALSE(slots.empty()) << r.pool;
    const int64_t n = static_cast<int64_t>(slots.size());
    HostTensor slot_tensor(DType::i32, {n});
    std::memcpy(slot_tensor.bytes(), slots.data(), slots.size() * 4);
    const bool keys = r.kind == PoolKind::indexer;
    HostTensor want(keys ? DType::f32 : DType::bf16, {n, keys ? 128 : 512});
    fill_poison(want, Poison::a);
    DeviceTensor device_slots = DeviceTensor::like(slot_tensor), got = DeviceTensor::like(want);
    device_slots.upload(slot_tensor);
    got.upload(want);
    if (keys) launch_kv_gather_indexer(*r.buffer, r.layer, static_cast<const int32_t*>(device_slots.buffer.data()), n,
                                       static_cast<float*>(got.buffer.data()), nullptr);
    else launch_kv_gather_model1(*r.buffer, r.layer, static_cast<const int32_t*>(device_slots.buffer.data()), n,
                                 static_cast<uint16_t*>(got.buffer.data()), nullptr);
    DSV4H_HIP_CHECK(hipStreamSynchronize(nullptr));
    const HostTensor& pool = expected.at(r.pool);
    const int64_t per_page = reference::pool_tokens_per_page(r.kind, s.swa_page);
    const int64_t page_bytes = reference::pool_page_bytes(r.kind, s.swa_page);
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* page = pool.bytes() + r.layer * pool.shape()[1] * 4 + slots[static_cast<size_t>(i)] / per_page * page_bytes;
      const int64_t entry = slots[static_cast<size_t>(i)] % per_page;
      if (keys) reference::indexer_unpack_entry(page, per_page, entry, want.data<float>() + i * 128);
      else reference::model1_unpack_token(page, per_page, entry, want.data<uint16_t>() + i * 512);
    }
    const OutputComparison cmp = compare_output(std::string("gathered ") + r.pool, want, Poison::a, got.download(),
                                                Poison::a, OutputCheck{});
    EXPECT_TRUE(cmp.passed()) << cmp.summary();
  }
}

}  // namespace
}  // namespace dsv4h
