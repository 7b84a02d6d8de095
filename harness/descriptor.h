// A component's descriptor, the one source of a component: its typed parameters (params.h), verify
// cases, reference binding, GPU launcher, outputs with their checks, work count, mutants and the
// benchmarks that time it. Every function takes the case already parsed into P.
//
// A descriptor lives in harness/components/NAME.cpp and defines `Component NAME_component()`
// returning `erase(descriptor)`; the build finds it there (harness/components/CMakeLists.txt),
// together with its DSV4H_MUTANT lines, and the registry lists it. Its GPU launcher sits in the
// same file inside `#if DSV4H_GPU_LAYER`, which only GPU builds define.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "component.h"
#include "params.h"

// A mutant of the component: its name (DSV4H_MUTANT_<NAME> in the kernel sources), the kernel
// sources it changes (space-separated file names under kernels/) and the bug it plants. The build
// reads these lines from the descriptor's source, so each stays on one line.
#define DSV4H_MUTANT(name, sources, bug) ::dsv4h::make_mutant(#name, sources, bug, false)
// A mutant whose bug is a race: the card's own schedule may hide it, so ci/gpu-suite's perturb
// phase runs it plain, under racecheck and with the schedule perturbed (kernels/portability.h).
#define DSV4H_RACE_MUTANT(name, sources, bug) ::dsv4h::make_mutant(#name, sources, bug, true)

namespace dsv4h {

Mutant make_mutant(const std::string& name, const std::string& sources, const std::string& bug, bool race);

// The gtest filter of a component's GPU checks: the generic GPU tests (tests/gpu/test_components_*.cpp)
// name their cases after the component, and `own` selects its own tests.
std::string gpu_test_filter(const std::string& component, const std::string& own);

// The goals' JSON, checked for the fields every goal needs; a logic_error naming the component.
nlohmann::json parse_goals(const std::string& component, const std::string& text);

template <typename P>
struct Descriptor {
  std::string name;
  std::string summary;
  std::vector<std::string> verify_cases;
  std::string batch_param;  // an integer member of P: the first dimension graph replay slices
  std::string replay_case;
  std::vector<Mutant> mutants;
  std::string gpu_tests;  // the component's own GPU tests, beside the generic ones (`*<name>*`)
  std::string bench_binary, bench_filter;
  std::string goals = "[]";  // JSON: the benchmark goals, as ci/goals.py reads them

  std::function<TensorMap(const CaseOf<P>&)> make_inputs;
  std::function<void(const CaseOf<P>&, const TensorMap& inputs)> validate_inputs;
  std::function<TensorMap(const CaseOf<P>&)> make_outputs;
  std::function<void(const CaseOf<P>&, const TensorMap& inputs, TensorMap& outputs)> reference;
  std::function<TensorMap(const CaseOf<P>&, const TensorMap& inputs, int64_t bucket)> pad_batch;
  std::function<WorkCount(const CaseOf<P>&, const TensorMap& inputs)> work;
  std::function<void(const CaseOf<P>&, TensorMap& outputs, Poison poison)> unchecked;
  std::function<std::map<std::string, OutputCheck>(const CaseOf<P>&)> checks;
  std::function<BatchSlice(const CaseOf<P>&, const TensorMap& inputs, int64_t begin, int64_t end)> slice_batch;
  std::vector<std::string> state_outputs;
  std::vector<std::string> relation_cases;
  std::function<void(const CaseOf<P>&, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream)> gpu;
};

namespace detail {

// `untyped` becomes `typed` called with the case parsed into P; an empty `typed` leaves it empty.
template <typename P, typename Untyped, typename Typed>
void bind_typed(Untyped& untyped, Typed typed) {
  if (!typed) return;
  untyped = [typed = std::move(typed)](const Case& c, auto&&... args) -> decltype(auto) {
    return typed(CaseOf<P>(c), std::forward<decltype(args)>(args)...);
  };
}

}  // namespace detail

// The descriptor behind case strings; a logic_error where it is incomplete or its batch parameter
// is not an integer parameter of P.
template <typename P>
Component erase(Descriptor<P> d) {
  Component c;
  c.name = d.name;
  c.summary = d.summary;
  c.params = param_schema<P>();
  c.verify_cases = d.verify_cases;
  c.batch_param = d.batch_param;
  c.replay_case = d.replay_case;
  c.mutants = d.mutants;
  for (const Mutant& m : d.mutants)
    for (const std::string& source : m.kernel_sources)
      if (std::find(c.kernel_sources.begin(), c.kernel_sources.end(), source) == c.kernel_sources.end())
        c.kernel_sources.push_back(source);
  c.gpu_tests = gpu_test_filter(d.name, d.gpu_tests);
  c.bench_binary = d.bench_binary;
  c.bench_filter = d.bench_filter;
  c.goals = parse_goals(d.name, d.goals);
  const bool batch_is_integer = std::any_of(c.params.begin(), c.params.end(), [&](const ParamSpec& p) {
    return p.name == d.batch_param && p.kind == ParamKind::integer;
  });
  if (!batch_is_integer || !d.make_inputs || !d.validate_inputs || !d.make_outputs || !d.reference || !d.work)
    throw std::logic_error(d.name + ": a descriptor needs an integer batch parameter, inputs, their validation, "
                                    "outputs, the reference and the work count");
  detail::bind_typed<P>(c.make_inputs, d.make_inputs);
  detail::bind_typed<P>(c.validate_inputs, d.validate_inputs);
  detail::bind_typed<P>(c.make_outputs, d.make_outputs);
  detail::bind_typed<P>(c.reference, d.reference);
  detail::bind_typed<P>(c.pad_batch, d.pad_batch);
  detail::bind_typed<P>(c.work, d.work);
  detail::bind_typed<P>(c.unchecked, d.unchecked);
  detail::bind_typed<P>(c.checks, d.checks);
  detail::bind_typed<P>(c.slice_batch, d.slice_batch);
  c.state_outputs = d.state_outputs;
  c.relation_cases = d.relation_cases;
  detail::bind_typed<P>(c.gpu, d.gpu);
  return c;
}

}  // namespace dsv4h
