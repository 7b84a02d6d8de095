#include "stream_hold.h"

namespace dsv4h {
namespace {

// Each poll reads host memory across the bus, about a microsecond: 2^24 polls are ten seconds or
// more, far beyond any sample's enqueue time. Counted in polls, not clock cycles: a clock64 deadline
// of about a second expired within 50 ms in the GPU suite's parallel runs (the driver time-slices
// the processes sharing the GPU), and there a million polls ran out while the host's calls stalled
// for over a second.
constexpr int kGiveUpPolls = 1 << 24;

__global__ void hold_until_released(volatile int* flags) {
  for (int poll = 0; flags[0] == 0; ++poll) {
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
  if (held_) (void)hipStreamSynchronize(held_);  // never free memory a waiting kernel polls
  (void)hipHostFree(flags_);
}

void StreamHold::hold(hipStream_t stream) {
  if (held_) throw std::logic_error("StreamHold::hold: the stream is already held");
  reinterpret_cast<volatile int*>(flags_)[0] = 0;
  reinterpret_cast<volatile int*>(flags_)[1] = 0;
  hold_until_released<<<1, 1, 0, stream>>>(device_flags_);
  DSV4H_LAUNCH_CHECK("hold_until_released");
  held_ = stream;
}

void StreamHold::release() {
  if (!held_) throw std::logic_error("StreamHold::release: nothing is held");
  reinterpret_cast<volatile int*>(flags_)[0] = 1;
  DSV4H_HIP_CHECK(hipStreamSynchronize(held_));
  held_ = nullptr;
  if (reinterpret_cast<volatile int*>(flags_)[1] != 0)
    throw std::runtime_error("StreamHold: the hold gave up before the host released it (ten seconds or more "
                             "of enqueueing); the timing behind it measured the host");
}

}  // namespace dsv4h
