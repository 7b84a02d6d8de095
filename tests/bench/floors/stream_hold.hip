#include "stream_hold.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace dsv4h {
namespace {

// Each poll is a system-scope acquire load of host memory across the bus, about a microsecond:
// 2^24 polls are ten seconds or more, far beyond any sample's enqueue time; counted in polls so that
// the give-up depends on no SM's cycle counter.
constexpr int kGiveUpPolls = 1 << 24;

__global__ void hold_until_released(int* flags) {
  for (int poll = 0; load_acquire_system(&flags[0]) == 0; ++poll) {
    if (poll == kGiveUpPolls) {
      flags[1] = 1;
      return;
    }
  }
}

}  // namespace

StreamHold::StreamHold() {
  DSV4H_HIP_CHECK(hipHostMalloc(reinterpret_cast<void**>(&flags_), 2 * sizeof(int), hipHostMallocMapped));
  DSV4H_HIP_CHECK(hipHostGetDevicePointer(reinterpret_cast<void**>(&device_flags_), flags_, 0));
}

StreamHold::~StreamHold() {
  if (held_) {  // unwinding from an error while held: let the stream go before freeing what it polls
    let_go();
    (void)hipStreamSynchronize(stream_);
  }
  (void)hipHostFree(flags_);
}

void StreamHold::let_go() {
  reinterpret_cast<volatile int*>(flags_)[0] = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  held_ = false;
}

bool StreamHold::disabled() {
  static const bool off = [] {
    const char* v = std::getenv("DSV4H_BENCH_NO_HOLD");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return off;
}

void StreamHold::hold(hipStream_t stream) {
  if (disabled()) return;
  if (held_) throw std::logic_error("StreamHold::hold: the stream is already held");
  reinterpret_cast<volatile int*>(flags_)[0] = 0;
  reinterpret_cast<volatile int*>(flags_)[1] = 0;
  hold_until_released<<<1, 1, 0, stream>>>(device_flags_);
  DSV4H_LAUNCH_CHECK("hold_until_released");
  held_ = true;
  stream_ = stream;
}

void StreamHold::release() {
  if (disabled()) return;
  if (!held_) throw std::logic_error("StreamHold::release: nothing is held");
  let_go();
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
  if (reinterpret_cast<volatile int*>(flags_)[1] != 0)
    throw std::runtime_error("StreamHold: the hold gave up before the host released it (ten seconds or more "
                             "of enqueueing); the timing behind it measured the host");
}

}  // namespace dsv4h
