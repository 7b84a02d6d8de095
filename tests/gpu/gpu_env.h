// The GPU every GPU test shares. Where none can be opened the test skips, printing why; it never
// passes and never fails for want of a GPU. On a machine that has one (ci/gpu-suite and
// ci/gpu-experiment set DSV4H_REQUIRE_GPU=1) the same condition fails the test instead: a driver
// error there must not turn the suite into skips.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "harness/component.h"
#include "harness/gpu_backend.h"

namespace dsv4h::testing {

inline GpuBackend* shared_gpu(std::string& why_not) {
  static std::string reason;
  static const std::unique_ptr<GpuBackend> gpu = open_gpu_backend(reason);
  why_not = reason;
  return gpu.get();
}

// Every registered component's name: the parameter of the generic GPU tests.
inline std::vector<std::string> component_names() {
  std::vector<std::string> names;
  for (const Component& component : registry().all()) names.push_back(component.name);
  return names;
}

inline bool gpu_required() {
  const char* required = std::getenv("DSV4H_REQUIRE_GPU");
  return required && *required && std::string(required) != "0";
}

}  // namespace dsv4h::testing

// Declares `GpuBackend* name`, or skips the test with the reason no GPU could be used (fails it
// where DSV4H_REQUIRE_GPU says a GPU must be there).
#define DSV4H_GPU_OR_SKIP(name)                                                                       \
  std::string name##_why_not;                                                                         \
  ::dsv4h::GpuBackend* name = ::dsv4h::testing::shared_gpu(name##_why_not);                           \
  if (!name && ::dsv4h::testing::gpu_required()) GTEST_FAIL() << "GPU required (DSV4H_REQUIRE_GPU): " \
                                                              << name##_why_not;                      \
  if (!name) GTEST_SKIP() << "GPU test skipped: " << name##_why_not
