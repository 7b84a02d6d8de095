#include "bench_support.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "harness/errors.h"
#include "harness/gpu_slot.h"
#include "perf/stats.h"
#include "tests/bench/floors/copy_floor.h"
#include "tests/bench/floors/empty_kernel.h"
#include "tests/bench/floors/latency_floor.h"

namespace dsv4h {

GpuTimer::GpuTimer() {
  DSV4H_HIP_CHECK(hipEventCreate(&start_));
  DSV4H_HIP_CHECK(hipEventCreate(&stop_));
}

GpuTimer::~GpuTimer() {
  (void)hipEventDestroy(start_);
  (void)hipEventDestroy(stop_);
}

double GpuTimer::elapsed_seconds() {
  DSV4H_HIP_CHECK(hipEventSynchronize(stop_));
  float ms = 0;
  DSV4H_HIP_CHECK(hipEventElapsedTime(&ms, start_, stop_));
  return ms * 1e-3;
}

double measure_copy_ceiling(void* dst, const void* src, size_t bytes, hipStream_t stream) {
  auto copy = [&] { DSV4H_HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, stream)); };
  copy();  // warm-up, outside any hold
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream));
  GpuTimer timer;
  std::vector<double> rates;
  for (int i = 0; i < 15; ++i) rates.push_back(2.0 * static_cast<double>(bytes) / timer.seconds(stream, copy));
  std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
  const double ceiling = rates[rates.size() / 2];
  std::printf("device-to-device copy ceiling measured here: %.1f GB/s (read + write)\n", ceiling / 1e9);
  return ceiling;
}

void PairedRatio::report(benchmark::State& state) const {
  if (!ratios_.empty()) state.counters["ratio_to_empty"] = report::median(ratios_);
}

void time_empty_kernel(benchmark::State& state, hipStream_t stream, int64_t launches) {
  time_back_to_back(state, stream, launches, 1, [&](int64_t) { launch_empty_kernel(stream); });
  state.counters["bytes"] = 0;
}

LoadChain::LoadChain()
    : chain(kChainEntries * kChainStride * sizeof(int32_t)), out(kChainEntries * sizeof(int32_t)) {
  std::vector<int32_t> next(kChainEntries * kChainStride, 0);
  for (int i = 0; i < kChainEntries; ++i) next[i * kChainStride] = (i * 7 + 3) % kChainEntries;  // no fixed point
  DSV4H_HIP_CHECK(hipMemcpy(chain.data(), next.data(), chain.bytes(), hipMemcpyHostToDevice));
}

void LoadChain::launch(int depth, hipStream_t stream) const {
  launch_dependent_loads(static_cast<const int32_t*>(chain.data()), static_cast<int32_t*>(out.data()), depth, stream);
}

void time_dependent_loads(benchmark::State& state, hipStream_t stream, int64_t launches, int depth) {
  const LoadChain chain;
  time_back_to_back(state, stream, launches, 1, [&](int64_t) { chain.launch(depth, stream); });
  state.counters["bytes"] = 0;
  state.counters["depth"] = depth;
}

void copy_async(CopyBy by, void* dst, const void* src, size_t bytes, hipStream_t stream) {
  if (by == CopyBy::kKernel)
    launch_copy_floor(dst, src, bytes, stream);
  else
    DSV4H_HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, stream));
}

void time_device_copy(benchmark::State& state, hipStream_t stream, void* dst, const void* src,
                      size_t pool_bytes, size_t moved_bytes, int64_t launches, CopyBy by) {
  const size_t bytes = moved_bytes / 2;
  if (bytes == 0 || bytes > pool_bytes)
    throw std::invalid_argument("time_device_copy: moved_bytes " + std::to_string(moved_bytes) + " must be in [2, 2 x pool_bytes " +
                                std::to_string(pool_bytes) + "]");
  const size_t stride = (bytes + 15) / 16 * 16;  // every set 16-byte aligned, as the copy kernel needs
  const int64_t sets = static_cast<int64_t>(std::clamp<size_t>(pool_bytes / stride, 1, 64));
  time_back_to_back(state, stream, launches, sets, [&](int64_t set) {
    const size_t offset = static_cast<size_t>(set) * stride;
    copy_async(by, static_cast<char*>(dst) + offset, static_cast<const char*>(src) + offset, bytes, stream);
  });
  state.counters["bytes"] = static_cast<double>(2 * bytes);
  state.counters["GBps"] = benchmark::Counter(2.0 * static_cast<double>(bytes) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

namespace {
// Work queued behind a hold must wait for the release, or every timing would measure the host.
// Checked before anything is timed. The kernel queued here is launched once first (see
// floors/stream_hold.h on kernels new to the process).
void check_stream_hold() {
  if (StreamHold::disabled()) {
    std::printf("stream hold off (DSV4H_BENCH_NO_HOLD=1): times include the host's launch rate\n");
    return;
  }
  hipStream_t stream = nullptr;
  hipEvent_t done = nullptr;
  DSV4H_HIP_CHECK(hipStreamCreate(&stream));
  DSV4H_HIP_CHECK(hipEventCreate(&done));
  StreamHold hold;
  launch_empty_kernel(stream);
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream));
  hold.hold(stream);
  launch_empty_kernel(stream);
  DSV4H_HIP_CHECK(hipEventRecord(done, stream));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const hipError_t while_held = hipEventQuery(done);
  hold.release();
  const hipError_t after_release = hipEventQuery(done);
  DSV4H_HIP_CHECK(hipEventDestroy(done));
  DSV4H_HIP_CHECK(hipStreamDestroy(stream));
  if (while_held != hipErrorNotReady || after_release != hipSuccess)
    throw std::runtime_error(std::string("stream hold: the queued work's event read ") + hipGetErrorName(while_held) +
                             " while held (expected not ready) and " + hipGetErrorName(after_release) +
                             " after the release (expected success); timings behind a hold would be wrong");
  std::printf("stream hold checked: queued work waits for the release\n");
}
}  // namespace

int run_benchmarks(int argc, char** argv, const std::function<void()>& before_run) {
  // Listing the benchmarks needs no GPU and touches none: the build's bench_goals_bind test lists
  // every binary's to check that each descriptor goal names one (tests/ci/check_goal_bindings.py).
  const bool listing = std::any_of(argv + 1, argv + argc, [](const char* arg) {
    const std::string a = arg;
    return a == "--benchmark_list_tests" || a == "--benchmark_list_tests=true" || a == "--benchmark_list_tests=1";
  });
  if (listing) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
  }
  int devices = 0;
  if (hipGetDeviceCount(&devices) != hipSuccess || devices == 0) {
    std::printf("[  SKIPPED ] benchmarks need a GPU; none found\n");
    return 77;
  }
  try {
    const int device = assigned_gpu();  // ctest's allocation, under a resource spec
    if (device >= devices) throw BadInput("CTEST_RESOURCE_GROUP_0_GPUS assigns device " + std::to_string(device) +
                                          " of " + std::to_string(devices));
    DSV4H_HIP_CHECK(hipSetDevice(device));
  } catch (const BadInput& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  check_stream_hold();
  // Read by the nightly history (perf/history.h): nights timed differently are not compared.
  benchmark::AddCustomContext("timing", StreamHold::disabled() ? "host-fed (DSV4H_BENCH_NO_HOLD)" : "device");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  if (before_run) before_run();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace dsv4h
