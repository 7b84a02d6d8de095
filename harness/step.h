// A composed step: several components run in order over shared tensors, as one forward step runs
// them (metadata, then pool stores, then compressor, indexer, attention), and itself a Component,
// so that `dsv4h verify`, the runner's two poisons and graph replay apply to it unchanged.
//
// Names in a step: a stage's outputs are the step's outputs "<stage>.<output>"; a stage's input X
// comes from the source its `inputs` names for X (an earlier stage's output "<stage>.<output>", or
// a step input of another stage, shared), else from the step input "<stage>.X". The reference runs
// the stages' references in order on host tensors; the GPU launcher enqueues the stages' launchers
// in order on one stream over the same device buffers (an earlier stage's output buffer IS the
// later stage's input: no copy), so a graph capture of the step holds the whole step. A mapped input
// named in the stage's `flat` is read as one dimension: the metadata's one-column fields [rows, 1]
// feed per-row vectors [rows], the same elements in the same buffer. A stage check's `scores`
// tensor (topk_set, row_rel_l2) is the stage's own tensor of that name, or the source it is mapped from.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "descriptor.h"

namespace dsv4h {

// A stage with its case already untyped: the step's case to the stage's (at the step's seed).
struct StepStage {
  std::string name;
  Component component;
  std::function<Case(const Case& step)> case_of;
  std::map<std::string, std::string> inputs;  // stage input -> source, where not "<name>.<input>"
  std::set<std::string> flat = {};            // mapped inputs read as [numel]
};

template <typename P>
struct TypedStage {
  std::string name;  // prefixes the stage's outputs and owned inputs: "<name>.<tensor>"
  Component component;
  // The stage's case string (no seed; it runs at the step's seed) from the step's parameters.
  std::function<std::string(const CaseOf<P>&)> case_of;
  std::map<std::string, std::string> inputs;
  std::set<std::string> flat = {};
};

template <typename P>
struct StepDescriptor {
  std::string name;
  std::string summary;
  std::vector<std::string> verify_cases;
  std::string batch_param;  // an integer member of P; each stage pads its own inputs at its own bucket
  std::string replay_case;
  std::string gpu_tests;  // the step's own GPU tests, beside the generic ones (`*<name>*`)
  std::vector<std::string> relation_cases;
  // Parameters a sub-batch of the step (relation.h) takes at their defaults, because its inputs
  // say what they say for the whole batch (e.g. the real request count, which is data).
  std::vector<std::string> slice_defaults;
  std::vector<TypedStage<P>> stages;
};

// The case of `component` that `text` (a case string without seed) names, at `seed`; a logic_error
// where it names another component (a step's stage wired to the wrong case).
Case stage_case(const Component& component, const std::string& text, uint64_t seed);

// The step behind `shell` (its name, summary, params, cases, batch parameter, GPU test filter):
// every function of a Component, composed from the stages. A stage without pad_batch, slice_batch
// or a GPU launcher leaves the step without one. A sub-batch of the step is the step's case at the
// sub-batch's size with `slice_defaults` at their defaults; each stage slices the inputs it owns.
Component compose_stages(Component shell, std::vector<StepStage> stages, std::vector<std::string> slice_defaults = {});

template <typename P>
Component compose(StepDescriptor<P> d) {
  Component shell;
  shell.name = d.name;
  shell.summary = d.summary;
  shell.params = param_schema<P>();
  shell.verify_cases = d.verify_cases;
  shell.batch_param = d.batch_param;
  shell.replay_case = d.replay_case;
  shell.gpu_tests = gpu_test_filter(d.name, d.gpu_tests);  // a step has no benchmark goals of its own
  shell.goals = nlohmann::json::array();
  shell.relation_cases = d.relation_cases;
  std::vector<StepStage> stages;
  for (TypedStage<P>& s : d.stages) {
    auto case_of = [typed = std::move(s.case_of), component = s.component](const Case& step) {
      return stage_case(component, typed(CaseOf<P>(step)), step.seed());
    };
    stages.push_back({s.name, s.component, std::move(case_of), s.inputs, s.flat});
  }
  return compose_stages(std::move(shell), std::move(stages), d.slice_defaults);
}

}  // namespace dsv4h
