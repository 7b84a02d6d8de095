// What every benchmark binary shares: GPU event timing, the device-to-device copy ceiling measured
// in the same process, the empty-kernel floor, and a main() that skips (exit 77) where no GPU is found.
#pragma once

#include <cstddef>
#include <functional>

#include <benchmark/benchmark.h>

#include "kernels/portability.h"

namespace dsv4h {

// Device seconds of whatever `launch` enqueues on `stream`, between two events.
class GpuTimer {
 public:
  GpuTimer();
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;

  template <typename Launch>
  double seconds(hipStream_t stream, Launch&& launch) {
    DSV4H_HIP_CHECK(hipEventRecord(start_, stream));
    launch();
    DSV4H_HIP_CHECK(hipEventRecord(stop_, stream));
    return elapsed_seconds();
  }

 private:
  double elapsed_seconds();
  hipEvent_t start_, stop_;
};

// Bytes per second (read + write counted) of a device-to-device copy of `bytes`: the median of 15
// copies after one warm-up. Prints it, since every fraction of it the benchmarks report hangs on it.
double measure_copy_ceiling(void* dst, const void* src, size_t bytes, hipStream_t stream);

// The floor that launch-bound benchmarks compare with: `launches` empty kernels back to back per
// sample on `stream`, reported as the mean device time per launch.
void time_empty_kernel(benchmark::State& state, hipStream_t stream, int64_t launches);

// main() of a benchmark binary: exit 77 without a GPU; otherwise `before_run` (e.g. to add the
// copy ceiling to the JSON context), then the registered benchmarks.
int run_benchmarks(int argc, char** argv, const std::function<void()>& before_run);

}  // namespace dsv4h
