#include "bench_support.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "kernels/empty_kernel.h"

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
  GpuTimer timer;
  std::vector<double> rates;
  for (int i = 0; i < 16; ++i) {
    const double s =
        timer.seconds(stream, [&] { DSV4H_HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, stream)); });
    if (i > 0) rates.push_back(2.0 * static_cast<double>(bytes) / s);  // the first one warms up
  }
  std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
  const double ceiling = rates[rates.size() / 2];
  std::printf("device-to-device copy ceiling measured here: %.1f GB/s (read + write)\n", ceiling / 1e9);
  return ceiling;
}

void time_empty_kernel(benchmark::State& state, hipStream_t stream, int64_t launches) {
  GpuTimer timer;
  launch_empty_kernel(stream);
  for (auto _ : state) {
    const double s = timer.seconds(stream, [&] {
      for (int64_t i = 0; i < launches; ++i) launch_empty_kernel(stream);
    });
    state.SetIterationTime(s / static_cast<double>(launches));
  }
  state.counters["bytes"] = 0;
  state.counters["launches_per_sample"] = static_cast<double>(launches);
}

int run_benchmarks(int argc, char** argv, const std::function<void()>& before_run) {
  int devices = 0;
  if (hipGetDeviceCount(&devices) != hipSuccess || devices == 0) {
    std::printf("[  SKIPPED ] benchmarks need a GPU; none found\n");
    return 77;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  if (before_run) before_run();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace dsv4h
