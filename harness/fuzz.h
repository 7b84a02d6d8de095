// Property fuzzing of batch sizes as a command (dsv4h fuzz): random cases of a component, each a
// verify case of its descriptor with a boundary-weighted batch size (1, powers of two and their
// neighbours, half of the draws; uniform sizes the other half) and a random seed, checked as verify
// checks them (the reference, and the GPU twice under two poisons; on the GPU, batches of 64 or
// fewer also replayed from captured graphs at every size up to theirs). A failure is shrunk to the
// smallest batch that still fails and saved as a regression fixture with its reproduction line,
// which every GPU suite and `dsv4h verify` then run. Deterministic for a seed and a case count.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "component.h"
#include "gpu_backend.h"

namespace dsv4h {

struct FuzzOptions {
  double seconds = 60;        // the time budget; no new case starts after it
  int64_t max_cases = 0;      // stop after this many cases (0: the budget alone)
  uint64_t seed = 1;
  int64_t max_batch = 4096;   // largest batch drawn
  std::string regression_dir; // where a shrunk counterexample is written
  std::function<void(const std::string&)> progress;  // a line now and then; may be empty
};

struct FuzzFailure {
  std::string drawn_case, shrunk_case, fixture, report;
};

struct FuzzResult {
  std::string component;
  int64_t cases = 0;     // checked
  int64_t refused = 0;   // drawn but impossible for the component (BadInput): drawn again
  int64_t replays = 0;   // of those checked, also replayed from graphs
  double seconds = 0;
  std::vector<FuzzFailure> failures;  // the first stops the component's run
};

FuzzResult fuzz_component(const Component& component, GpuBackend* gpu, const FuzzOptions& options);

// The batch sizes a draw favours, within [1, max_batch].
std::vector<int64_t> boundary_batches(int64_t max_batch);

}  // namespace dsv4h
