// The benchmarks' floor kernel must follow its chain of dependent loads, else it is not the floor it
// claims to be. (Their stream hold is checked by each benchmark binary before it times anything:
// tests/bench/bench_support.cpp.)
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "gpu_env.h"
#include "harness/gpu/device_tensor.h"
#include "harness/random.h"
#include "kernels/latency_floor.h"

namespace dsv4h {
namespace {

constexpr int32_t kUnwritten = 0x7fffffff;

struct Chain {
  std::vector<int32_t> next;  // entry e at next[e * kChainStride]; the rest poisoned
  DeviceBuffer chain{kChainEntries * kChainStride * sizeof(int32_t)}, out{kChainEntries * sizeof(int32_t)};

  explicit Chain(uint64_t seed) : next(kChainEntries * kChainStride, kUnwritten) {
    Rng rng(seed);
    std::printf("chain seed %llu\n", static_cast<unsigned long long>(seed));
    for (int e = 0; e < kChainEntries; ++e) next[e * kChainStride] = static_cast<int32_t>(rng.integer(0, kChainEntries - 1));
    DSV4H_HIP_CHECK(hipMemcpy(chain.data(), next.data(), chain.bytes(), hipMemcpyHostToDevice));
    const std::vector<int32_t> poison(kChainEntries, kUnwritten);
    DSV4H_HIP_CHECK(hipMemcpy(out.data(), poison.data(), out.bytes(), hipMemcpyHostToDevice));
  }
  void launch(int depth, hipStream_t stream) const {
    launch_dependent_loads(static_cast<const int32_t*>(chain.data()), static_cast<int32_t*>(out.data()), depth, stream);
  }
  std::vector<int32_t> expected(int depth) const {
    std::vector<int32_t> e(kChainEntries);
    for (int t = 0; t < kChainEntries; ++t) {
      int32_t at = t;
      for (int d = 0; d < depth; ++d) at = next[at * kChainStride];
      e[t] = at;
    }
    return e;
  }
  std::vector<int32_t> result() const {
    std::vector<int32_t> r(kChainEntries);
    DSV4H_HIP_CHECK(hipMemcpy(r.data(), out.data(), out.bytes(), hipMemcpyDeviceToHost));
    return r;
  }
};

TEST(LatencyFloor, DependentLoadsFollowTheChain) {
  DSV4H_GPU_OR_SKIP(gpu);
  for (int depth : {0, 1, 2, 3, 5}) {
    const Chain c(1000 + depth);
    c.launch(depth, nullptr);
    DSV4H_HIP_CHECK(hipStreamSynchronize(nullptr));
    EXPECT_EQ(c.result(), c.expected(depth)) << "depth " << depth;
  }
  EXPECT_THROW(launch_dependent_loads(nullptr, nullptr, -1, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace dsv4h
