#include "stream_hold.h"

namespace dsv4h {
namespace {

// About a second at the clocks of current GPUs (1 to 2.5 GHz): far beyond any sample's enqueue time.
constexpr long long kGiveUpCycles = 2'000'000'000;

__global__ void hold_until_released(volatile int* flags) {
  const long long start = clock64();
  while (flags[0] == 0) {
    if (clock64() - start > kGiveUpCycles) {
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
    throw std::runtime_error("StreamHold: the hold gave up before the host released it (over a second "
                             "of enqueueing); the timing behind it measured the host");
}

}  // namespace dsv4h
