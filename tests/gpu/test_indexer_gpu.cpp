// The indexer's GPU checks beside the generic ones (every verify case, graph replay, relations):
// each scoring kernel by name (the generic runs take only the platform's); the top-k kernel's
// radix select where every score ties (any set is right, but it must be a set of topk distinct
// visible indices), at c4 lengths up to 16K; and the query kernel's fp8 bytes, which the scoring
// kernel reads, against the values the harness compares, and its scales.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gpu_env.h"
#include "harness/compare.h"
#include "harness/gpu/device_tensor.h"
#include "harness/poison.h"
#include "harness/verify.h"
#include "kernels/indexer.h"
#include "reference/narrow_float.h"
#include "reference/rope.h"

namespace dsv4h {
namespace {

// Both scoring kernels: the fp32 FMA one (AMD's path, which an NVIDIA run reaches only here) and the
// tensor-core one (NVIDIA's), on select cases of 64, 4 and 36 heads (a partial 16-head tile), decode and
// prefill rows, each within the descriptor's score check, unwritten scores failing it.
TEST(IndexerGpu, EachScoringKernelPassesTheScoreCheck) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Component& indexer = registry().get("indexer");
  std::vector<std::pair<std::string, void (*)(const IndexerLogitsArgs&, hipStream_t)>> kernels = {
      {"fma", launch_indexer_logits_fma}};
#if defined(DSV4H_GPU_NVIDIA)
  kernels.emplace_back("mma", launch_indexer_logits_mma);
#endif
  for (const char* text : {"indexer(bs=5,ctx=65536,seed=7)", "indexer(bs=33,ctx=600,heads=4,index_topk=16)",
                           "indexer(bs=6,ctx=4096,heads=36,seed=3)",
                           "indexer(bs=260,ctx=2100,seq_len=2100,per_request=260,heads=4)"}) {
    const Case c = parse_case(text);
    const TensorMap inputs = indexer.make_inputs(c);
    const TensorMap expected = reference_outputs(indexer, c, inputs, Poison::a);
    const TensorMap magnitudes = topk_scores(indexer, c, inputs, expected);
    const DeviceTensorMap device = DeviceTensorMap::upload(inputs);
    const HostTensor& want = expected.at("scores");
    for (const auto& [name, launch] : kernels) {
      HostTensor got(DType::f32, want.shape());
      fill_poison(got, Poison::a);
      DeviceBuffer logits(static_cast<size_t>(got.nbytes()));
      DSV4H_HIP_CHECK(hipMemcpy(logits.data(), got.bytes(), logits.bytes(), hipMemcpyHostToDevice));
      IndexerLogitsArgs args{};
      args.q_fp8 = device.data<const uint8_t>("q_fp8");
      args.q_scale = device.data<const float>("q_scale");
      args.weights = device.data<const float>("weights");
      args.positions = device.data<const int32_t>("positions");
      args.page_table = device.data<const int32_t>("page_table");
      args.cache = device.data<const uint8_t>("indexer_cache");
      args.logits = static_cast<float*>(logits.data());
      args.rows = want.shape()[0];
      args.heads = c.integer("heads");
      args.pages = inputs.at("page_table").shape()[1];
      args.pool_pages = inputs.at("indexer_cache").shape()[0];
      launch(args, nullptr);
      DSV4H_HIP_CHECK(hipMemcpy(got.bytes(), logits.data(), logits.bytes(), hipMemcpyDeviceToHost));
      const OutputComparison r = compare_output("scores", want, Poison::a, got, Poison::a,
                                                output_check(indexer, c, "scores", DType::f32), &magnitudes);
      EXPECT_TRUE(r.passed()) << name << " on " << text << ": " << r.summary();
    }
  }
}

TEST(IndexerGpu, EveryScoreTiedStillSelectsDistinctVisibleEntries) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Component& indexer = registry().get("indexer");
  for (const char* text : {"indexer(bs=3,ctx=65536,seed=5)", "indexer(bs=4,ctx=68,seq_len=68,heads=4,index_topk=16)"}) {
    const Case c = parse_case(text);
    TensorMap inputs = indexer.make_inputs(c);
    // Every entry of the pool a copy of one: all of a row's visible scores are equal.
    HostTensor& cache = inputs.at("indexer_cache");
    const int64_t page_bytes = cache.shape()[1] * 4;
    for (int64_t page = 0; page < cache.shape()[0]; ++page)
      for (int64_t e = 0; e < 64; ++e) {
        uint8_t* base = cache.bytes() + page * page_bytes;
        std::memcpy(base + e * 128, cache.bytes(), 128);
        std::memcpy(base + 64 * 128 + e * 4, cache.bytes() + 64 * 128, 4);
      }
    const CaseRun run = run_case(indexer, c, gpu, inputs);
    EXPECT_TRUE(run.result.passed()) << run.result.report();
  }
}

TEST(IndexerGpu, QueryBytesAreTheComparedValues) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Case c = parse_case("indexer(stage=1,bs=5,ctx=65536,seed=3)");
  const TensorMap inputs = registry().get("indexer").make_inputs(c);
  const DeviceTensorMap device = DeviceTensorMap::upload(inputs);
  const int64_t values = 5 * 64 * 128;
  DeviceBuffer codes(values), as_float(values * 4), scales(5 * 64 * 4);
  // Poisoned first: 0xff is e4m3's NaN code and an f32 NaN, so a kernel writing nothing fails.
  const std::vector<uint8_t> poison(static_cast<size_t>(as_float.bytes()), 0xff);
  for (DeviceBuffer* b : {&codes, &as_float, &scales})
    DSV4H_HIP_CHECK(hipMemcpy(b->data(), poison.data(), b->bytes(), hipMemcpyHostToDevice));
  IndexerQueryArgs args{};
  args.q = device.data<const uint16_t>("q");
  args.positions = device.data<const int32_t>("positions");
  args.q_fp8 = static_cast<uint8_t*>(codes.data());
  args.q_scale = static_cast<float*>(scales.data());
  args.q_fp8_values = static_cast<float*>(as_float.data());
  const Eigen::VectorXd freqs = reference::rope_frequencies(reference::rope_for_ratio(4));
  for (int i = 0; i < 32; ++i) args.freqs[i] = freqs(i);
  args.rows = 5;
  args.heads = 64;
  launch_indexer_query(args, nullptr);
  std::vector<uint8_t> got_codes(values);
  std::vector<float> got_values(values);
  DSV4H_HIP_CHECK(hipMemcpy(got_codes.data(), codes.data(), codes.bytes(), hipMemcpyDeviceToHost));
  DSV4H_HIP_CHECK(hipMemcpy(got_values.data(), as_float.data(), as_float.bytes(), hipMemcpyDeviceToHost));
  for (int64_t i = 0; i < values; ++i)
    ASSERT_EQ(reference::fp8_e4m3_to_float(got_codes[i]), got_values[i]) << "value " << i;
  // The scales, which the descriptor's launch also compares, exactly as the reference's.
  std::vector<float> got_scales(5 * 64);
  DSV4H_HIP_CHECK(hipMemcpy(got_scales.data(), scales.data(), scales.bytes(), hipMemcpyDeviceToHost));
  const TensorMap expected = reference_outputs(registry().get("indexer"), c, inputs, Poison::a);
  for (int64_t i = 0; i < 5 * 64; ++i)
    ASSERT_EQ(expected.at("q_scale").get(i), got_scales[static_cast<size_t>(i)]) << "scale " << i;
}

}  // namespace
}  // namespace dsv4h
