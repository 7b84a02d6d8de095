// Holds a stream until the host releases it, so that everything enqueued behind the hold is queued
// on the device before the first of it starts: timed back-to-back launches then measure device
// time, not the host's launch rate (an empty kernel launched from the host takes about 4 us each on
// the H200's machine, longer than the device needs for it).
#pragma once

#include "kernels/portability.h"

namespace dsv4h {

class StreamHold {
 public:
  StreamHold();
  ~StreamHold();
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;

  // Enqueues a kernel that waits for release() (or gives up after ten seconds or so, which release()
  // then reports as an error: the timing behind it would have measured the host after all). Every
  // kernel queued behind it must have been launched before in this process: CUDA loads a kernel's
  // code at its first launch, and that load appears to wait for the running hold, which then never
  // sees its release (holds failed so on the H200 exactly where the kernel behind them was new to
  // the process). The benchmarks warm up before they time anyway.
  void hold(hipStream_t stream);
  // Lets the held stream run; throws if the hold had already given up.
  void release();
  // DSV4H_BENCH_NO_HOLD=1 (ci/gpu-profile sets it) turns hold() and release() into no-ops. Nsight
  // Compute serialises launches: it would run a hold's kernel to its give-up before profiling
  // anything queued behind it, and the benchmark would then fail. Timings without the hold measure
  // the host's launch rate too; the profiler's own durations are what such a run is for.
  static bool disabled();

 private:
  void let_go();  // the host's write the polling kernel waits for

  int* flags_ = nullptr;         // host memory mapped into the device: [0] released, [1] gave up
  int* device_flags_ = nullptr;  // the same memory, as the device addresses it
  bool held_ = false;
  hipStream_t stream_ = nullptr;  // the held stream (0 is the default stream)
};

}  // namespace dsv4h
