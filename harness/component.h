// A component as the harness runs it: everything it needs to generate, run, compare, replay and
// benchmark a case, behind case strings. Components are written as typed descriptors
// (descriptor.h) in harness/components/, one file each, which the build finds by itself.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "case_spec.h"
#include "output_check.h"
#include "poison.h"
#include "tensor.h"

namespace dsv4h {

class DeviceTensorMap;  // harness/gpu/device_tensor.h; exists only in GPU builds

struct WorkCount {
  double bytes_moved = 0;  // the least traffic one launch must cause
  double flops = 0;
};

// A deliberately broken kernel of the component (a spec bug it must catch): built with
// -DDSV4H_MUTANT_<NAME> from the kernel sources it changes. The build reads these from the
// descriptor's DSV4H_MUTANT lines (harness/components/CMakeLists.txt).
struct Mutant {
  std::string name;
  std::vector<std::string> kernel_sources;  // file names under kernels/
  std::string bug;
  bool race = false;  // caught where the schedule is perturbed (ci/gpu-suite perturb), not required plain
};

// Rows [begin, end) of a case's batch as a case of its own (relation.h): the sub-case, its inputs,
// and, per output that maps to rows of the full run, the full output's row (first dimension) where
// the sub-case's output starts. Outputs not named (a pool, a scalar) are not compared row by row.
struct BatchSlice {
  Case c;
  TensorMap inputs;
  std::map<std::string, int64_t> output_rows;
};

struct Component {
  std::string name;
  std::string summary;
  std::vector<ParamSpec> params;
  // Canonical cases (without seed) that `dsv4h verify` runs for every seed.
  std::vector<std::string> verify_cases;
  // The integer parameter that is the batch dimension (the first dimension of every tensor that
  // graph replay slices), and the case graph replay starts from.
  std::string batch_param;
  std::string replay_case;
  std::vector<Mutant> mutants;
  // The kernel files (under kernels/) its GPU launcher runs: its mutants' sources, a step's those of
  // its stages. `dsv4h report status` flags a component whose kernels changed after its last GPU run.
  std::vector<std::string> kernel_sources;
  // The gtest filter that selects the component's GPU checks: what must catch its mutants.
  std::string gpu_tests;
  // The benchmark binary timing it and the --benchmark_filter of its benchmarks and floors.
  std::string bench_binary, bench_filter;
  // Its benchmark goals with their floors, as data that ci/goals.py judges a record on.
  nlohmann::json goals;

  // Seeded inputs for a case; BadInput on impossible parameters.
  std::function<TensorMap(const Case&)> make_inputs;
  // BadInput naming the tensor and field when given inputs do not fit the case.
  std::function<void(const Case&, const TensorMap&)> validate_inputs;
  // Outputs with their shapes and dtypes; the runner poisons them before every run.
  std::function<TensorMap(const Case&)> make_outputs;
  // Writes what the component writes into the poisoned outputs, and nothing else.
  std::function<void(const Case&, const TensorMap& inputs, TensorMap& outputs)> reference;
  // Inputs of a batch of `case` rows, padded to `bucket` rows the way an engine pads a captured
  // graph's static buffers. Graph replay requires the bucket's replay to equal `reference` run on
  // these inputs at the bucket's case, so the reference states what padding may write (a sink slot,
  // a tail reset) and everything it leaves poisoned must stay unwritten.
  std::function<TensorMap(const Case&, const TensorMap& inputs, int64_t bucket)> pad_batch;
  std::function<WorkCount(const Case&, const TensorMap& inputs)> work;
  // Elements that no reader looks at and any run may write (a pool's sink slot): every comparison
  // sees them as unwritten (set to that run's poison), so that a kernel may write them or not.
  // Empty where every element counts.
  std::function<void(const Case&, TensorMap& outputs, Poison poison)> unchecked;
  // Per output, how it is compared; an output not named here is compared under its dtype's class.
  std::function<std::map<std::string, OutputCheck>(const Case&)> checks;
  // Batch relations (relation.h). Empty where a batch's rows are not independent.
  std::function<BatchSlice(const Case&, const TensorMap& inputs, int64_t begin, int64_t end)> slice_batch;
  // Outputs a step updates in place (a pool): a split run's later part starts from what the
  // earlier part left there, and the parts' final state must equal the whole run's.
  std::vector<std::string> state_outputs;
  // Relation cases (relation.h, without seed) that `dsv4h verify` runs for every seed.
  std::vector<std::string> relation_cases;
  // Enqueues the kernel(s) on `stream` (a hipStream_t); empty in builds without GPU kernels.
  std::function<void(const Case&, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream)> gpu;
};

class Registry {
 public:
  void add(Component component);
  const Component& get(const std::string& name) const;  // BadInput listing the known names
  const std::vector<Component>& all() const { return components_; }

 private:
  std::vector<Component> components_;
};

// Every component of this build, by name, with its GPU launcher where the build has kernels.
const Registry& registry();

// Seeds are below 10^19, so that a case string (19 decimal digits at most) names every seed.
constexpr uint64_t kSeedLimit = 10'000'000'000'000'000'000u;

// Parses a case string against the registry; the seed is the string's, else `default_seed`.
Case parse_case(const std::string& text, uint64_t default_seed = 1);

// Allocated, not-yet-poisoned outputs of a case after validating its inputs; a logic_error where an
// output is of a one-byte dtype, which no poison can mark as unwritten.
TensorMap checked_outputs(const Component& component, const Case& c, const TensorMap& inputs);

// The reference's outputs of a case: checked_outputs filled with `poison`, then written by the
// reference (what it leaves unwritten stays poison).
TensorMap reference_outputs(const Component& component, const Case& c, const TensorMap& inputs, Poison poison);

// The check of one output of `c`: the descriptor's, else elementwise under its dtype's class.
OutputCheck output_check(const Component& component, const Case& c, const std::string& output, DType dtype);

// `outputs` of a run under `poison` as comparisons see them: the component's unchecked elements set
// to that poison.
void mask_unchecked(const Component& component, const Case& c, TensorMap& outputs, Poison poison);

}  // namespace dsv4h
