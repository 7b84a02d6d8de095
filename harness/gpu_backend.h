// The GPU side as the rest of the harness sees it. CPU builds link no_gpu.cpp, which never opens
// one; GPU builds link gpu/gpu_backend.cpp. Callers never need to know which.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "compare.h"
#include "component.h"
#include "poison.h"

namespace dsv4h {

struct ReplayOptions {
  int64_t min_batch = 1;  // the batch sizes replayed: min_batch..max_batch (a test's share of them)
  int64_t max_batch = 256;
  std::vector<int64_t> buckets;                   // sorted; the last must be >= max_batch
  std::function<void(int64_t batch)> on_batch;    // progress, may be empty
};

struct ReplayResult {
  int64_t batches_checked = 0;  // the replay stops after 5 failed batches, short of max_batch
  int64_t batches_failed = 0;
  double budget_used = 0;              // worst replay-vs-reference error / allowed
  std::vector<std::string> failures;   // the first few, each naming batch, bucket and output
};

// An engine's graph batch list: 1, 2, 4, 8, 16, 24, 32, 48, 64, then every 32, ending at max.
std::vector<int64_t> default_buckets(int64_t max_batch);

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  virtual std::string device_name() const = 0;
  // Uploads inputs, poisons the outputs, launches once, waits, and returns what the GPU wrote.
  virtual TensorMap run(const Component& component, const Case& c, const TensorMap& inputs, Poison poison) = 0;
  // The same over outputs that hold given values (poison, or the state an earlier step left, as a
  // split relation's later piece starts from): uploads them as they are. A stand-in backend that
  // cannot (a test's) says so.
  virtual TensorMap run_over(const Component& component, const Case& c, const TensorMap&, const TensorMap&) {
    throw std::logic_error(device_name() + " cannot run " + component.name + " from given outputs (" + c.str() + ")");
  }
  // Captures the component at every bucket that holds a batch of min_batch..max_batch, then for
  // each of those batches pads its inputs (replay_batches.h) to the smallest bucket that holds it,
  // replays that bucket's graph into poisoned outputs, and compares every output with the reference
  // and with an eager launch, both run on the same padded inputs at the bucket's case. A failed
  // capture throws, naming what broke it.
  virtual ReplayResult graph_replay(const Component& component, const Case& base, const ReplayOptions& options) = 0;
};

// Null when this build has no GPU layer or no usable device; `why_not` then says which.
std::unique_ptr<GpuBackend> open_gpu_backend(std::string& why_not);

}  // namespace dsv4h
