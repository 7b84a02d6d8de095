// What every benchmark binary shares: GPU event timing, the device-to-device copy ceiling measured
// in the same process, the empty-kernel floor, and a main() that skips (exit 77) where no GPU is found.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include <benchmark/benchmark.h>

#include "harness/gpu/device_tensor.h"
#include "kernels/portability.h"
#include "tests/bench/floors/empty_kernel.h"
#include "tests/bench/floors/stream_hold.h"

namespace dsv4h {

// Device seconds of whatever `launch` enqueues on `stream`, between two events. The stream is held
// while `launch` enqueues, so the events bracket device work only, back to back.
class GpuTimer {
 public:
  GpuTimer();
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;

  template <typename Launch>
  double seconds(hipStream_t stream, Launch&& launch) {
    hold_.hold(stream);
    DSV4H_HIP_CHECK(hipEventRecord(start_, stream));
    launch();
    DSV4H_HIP_CHECK(hipEventRecord(stop_, stream));
    hold_.release();
    return elapsed_seconds();
  }
  // The same without the hold, for work the host must feed as it runs (more launches than a held
  // stream queues, or host synchronisations inside): the events then bracket the host's pace too.
  template <typename Launch>
  double seconds_host_fed(hipStream_t stream, Launch&& launch) {
    DSV4H_HIP_CHECK(hipEventRecord(start_, stream));
    launch();
    DSV4H_HIP_CHECK(hipEventRecord(stop_, stream));
    return elapsed_seconds();
  }

 private:
  double elapsed_seconds();
  hipEvent_t start_, stop_;
  StreamHold hold_;
};

// Launches per timing sample: at least 8 back to back, and enough to cover 256 MB (at most 64), so
// that the sample's first and last launches weigh little against the steady state in between.
inline int64_t launches_per_sample(double bytes) {
  return std::clamp<int64_t>(static_cast<int64_t>(double(int64_t{256} << 20) / std::max(bytes, 1.0)), 8, 64);
}

// Decode-size goals are ratios to an empty kernel. A benchmark that times an empty kernel's sample
// right after each of its own samples reports the median of the paired ratios as counter
// "ratio_to_empty": what moves both alike (the clocks, the machine's other load) cancels, where
// the empty-kernel benchmark of the same binary ran up to a minute earlier.
class PairedRatio {
 public:
  void add(double seconds, double empty_seconds) { ratios_.push_back(seconds / empty_seconds); }
  void report(benchmark::State& state) const;

 private:
  std::vector<double> ratios_;
};

// The timing every benchmark shares: `launch(set)` for each of `sets` input sets once, untimed
// (a kernel's first launch must not wait behind the hold: floors/stream_hold.h), then per sample
// `launches` calls back to back over the sets in turn, the mean device time per call reported.
// With `paired_with_empty`, each sample is followed by one of as many empty kernels (PairedRatio).
template <typename Launch>
void time_back_to_back(benchmark::State& state, hipStream_t stream, int64_t launches, int64_t sets, Launch&& launch,
                       bool paired_with_empty = false) {
  for (int64_t set = 0; set < sets; ++set) launch(set);
  if (paired_with_empty) launch_empty_kernel(stream);
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream));
  GpuTimer timer;
  PairedRatio paired;
  int64_t next = 0;
  for (auto _ : state) {
    const double s = timer.seconds(stream, [&] {
      for (int64_t i = 0; i < launches; ++i) launch(next++ % sets);
    });
    state.SetIterationTime(s / static_cast<double>(launches));
    if (paired_with_empty)
      paired.add(s, timer.seconds(stream, [&] {
        for (int64_t i = 0; i < launches; ++i) launch_empty_kernel(stream);
      }));
  }
  state.counters["launches_per_sample"] = static_cast<double>(launches);
  if (paired_with_empty) paired.report(state);
}

// Bytes per second (read + write counted) of a device-to-device copy of `bytes`: the median of 15
// copies after one warm-up. Prints it, since every fraction of it the benchmarks report hangs on it.
double measure_copy_ceiling(void* dst, const void* src, size_t bytes, hipStream_t stream);

// The floor that launch-bound benchmarks compare with: `launches` empty kernels back to back per
// sample on `stream`, reported as the mean device time per launch.
void time_empty_kernel(benchmark::State& state, hipStream_t stream, int64_t launches);

// The device data of floors/latency_floor.h's dependent loads: the chain and its output.
struct LoadChain {
  LoadChain();
  void launch(int depth, hipStream_t stream) const;
  DeviceBuffer chain, out;
};

// Next to it, `depth` dependent loads and a store, timed the same way: the floor of a decode-size
// kernel whose loads depend on one another. The chain is L2-resident, as a decode step's small
// inputs are.
void time_dependent_loads(benchmark::State& state, hipStream_t stream, int64_t launches, int depth);

// Who moves a copy floor's bytes: the driver's device-to-device copy, or a plain copy kernel
// (floors/copy_floor.h). Neither is the faster at every size, so a goal's floor is the faster.
enum class CopyBy { kDriver, kKernel };

// Enqueues a copy of `bytes` by `by`.
void copy_async(CopyBy by, void* dst, const void* src, size_t bytes, hipStream_t stream);

// The copy floor of a benchmark's size: copies of moved_bytes / 2 (so moved_bytes read + write)
// by `by`, rotating through up to 64 sets of [src, src + pool_bytes) and [dst, dst + pool_bytes),
// `launches` per sample; the sets outgrow the 50 MB L2 from the mid sizes on (the decode sizes'
// sets stay in it, as the kernels' do). What a copy of the same bytes reaches at that size.
void time_device_copy(benchmark::State& state, hipStream_t stream, void* dst, const void* src,
                      size_t pool_bytes, size_t moved_bytes, int64_t launches, CopyBy by);

// main() of a benchmark binary: exit 77 without a GPU; otherwise `before_run` (e.g. to add the
// copy ceiling to the JSON context), then the registered benchmarks.
int run_benchmarks(int argc, char** argv, const std::function<void()>& before_run);

}  // namespace dsv4h
