// The GPU every GPU test shares. Where none can be opened the test skips, printing why; it never
// passes and never fails for want of a GPU.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "harness/gpu_backend.h"

namespace dsv4h::testing {

inline GpuBackend* shared_gpu(std::string& why_not) {
  static std::string reason;
  static const std::unique_ptr<GpuBackend> gpu = open_gpu_backend(reason);
  why_not = reason;
  return gpu.get();
}

}  // namespace dsv4h::testing

// Declares `GpuBackend* name` or skips the test with the reason no GPU could be used.
#define DSV4H_GPU_OR_SKIP(name)                                              \
  std::string name##_why_not;                                                \
  ::dsv4h::GpuBackend* name = ::dsv4h::testing::shared_gpu(name##_why_not);  \
  if (!name) GTEST_SKIP() << "GPU test skipped: " << name##_why_not
