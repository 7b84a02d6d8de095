// Graph capture must fail loudly, naming the culprit, when a launch sequence synchronises with the
// host, copies synchronously or allocates: these components do exactly that on purpose.
#include <gtest/gtest.h>

#include "gpu_env.h"
#include "harness/gpu/device_tensor.h"
#include "kernels/filtered_silu_mul.h"

namespace dsv4h {
namespace {

// filtered_silu_mul with one offending call before its launch.
Component with_offence(std::function<void(hipStream_t)> offence) {
  Component c = registry().get("filtered_silu_mul");
  const auto launch = c.gpu;
  c.gpu = [launch, offence](const Case& k, const DeviceTensorMap& in, DeviceTensorMap& out, void* stream) {
    offence(static_cast<hipStream_t>(stream));
    launch(k, in, out, stream);
  };
  return c;
}

void expect_capture_fails_naming(GpuBackend* gpu, const Component& component, const std::string& name) {
  ReplayOptions options;
  options.max_batch = 4;
  options.buckets = default_buckets(4);
  try {
    gpu->graph_replay(component, parse_case("filtered_silu_mul(rows=1,inter=64,kept=1)"), options);
    FAIL() << "capture accepted a launch sequence with " << name;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    std::printf("capture refused as it must: %s\n", what.c_str());
    EXPECT_NE(what.find("graph capture of"), std::string::npos) << what;
    EXPECT_NE(what.find(name), std::string::npos) << what;
  }
  // The stream is usable again afterwards.
  const Component& plain = registry().get("filtered_silu_mul");
  const TensorMap out = gpu->run(plain, parse_case("filtered_silu_mul(rows=2,inter=8,kept=1)"),
                                 plain.make_inputs(parse_case("filtered_silu_mul(rows=2,inter=8,kept=1)")), Poison::a);
  EXPECT_FALSE(is_poison(out.at("out"), 0, Poison::a));
}

TEST(GraphCaptureGuard, HostSynchronisationFailsCapture) {
  DSV4H_GPU_OR_SKIP(gpu);
  expect_capture_fails_naming(gpu, with_offence([](hipStream_t s) { DSV4H_HIP_CHECK(hipStreamSynchronize(s)); }),
                              "hipStreamSynchronize");
}

TEST(GraphCaptureGuard, SynchronousCopyFailsCapture) {
  DSV4H_GPU_OR_SKIP(gpu);
  static DeviceBuffer scalar(4);
  expect_capture_fails_naming(gpu, with_offence([](hipStream_t) {
                                int32_t host = 0;  // e.g. reading the last request index with .item()
                                DSV4H_HIP_CHECK(hipMemcpy(&host, scalar.data(), 4, hipMemcpyDeviceToHost));
                              }),
                              "hipMemcpy");
}

TEST(GraphCaptureGuard, RawAllocationFailsCapture) {
  DSV4H_GPU_OR_SKIP(gpu);
  expect_capture_fails_naming(gpu, with_offence([](hipStream_t) {
                                void* p = nullptr;
                                DSV4H_HIP_CHECK(hipMalloc(&p, 256));
                                DSV4H_HIP_CHECK(hipFree(p));
                              }),
                              "hipMalloc");
}

TEST(GraphCaptureGuard, HarnessAllocationFailsCapture) {
  DSV4H_GPU_OR_SKIP(gpu);
  expect_capture_fails_naming(gpu, with_offence([](hipStream_t) { DeviceBuffer scratch(1024); }), "hipMalloc");
}

}  // namespace
}  // namespace dsv4h
