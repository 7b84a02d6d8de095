// The one runner every front end uses (dsv4h, the GPU tests, the properties): run a case on the
// reference and, when a GPU backend is given, twice on the GPU under two poisons; compare
// everything that must agree; record the result with the errors against their budgets.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compare.h"
#include "component.h"
#include "gpu_backend.h"

namespace dsv4h {

enum class CaseStatus { pass, fail, bad_input, error };

struct CaseResult {
  std::string component, case_text, source, backend, device;
  CaseStatus status = CaseStatus::pass;
  std::string message;  // for bad_input and error
  // "reference vs expected", "gpu vs reference", "gpu poison a vs b", "gpu vs expected".
  std::vector<std::pair<std::string, OutputComparison>> checks;
  double reference_ms = 0, gpu_ms = 0;
  WorkCount work;  // what one launch of the case must move and compute
  std::string repro;
  bool passed() const { return status == CaseStatus::pass; }
  std::string report() const;  // one line when it passed; every failed check in full otherwise
};

struct CaseRun {
  TensorMap inputs;
  std::map<std::string, TensorMap> outputs;  // "reference", and "gpu" when it ran
  CaseResult result;
};

// `given_inputs` replaces the generated inputs; `expected` adds checks against stored outputs;
// `source` is "generated" or the fixture's path (it shapes the reproduction command).
CaseRun run_case(const Component& component, const Case& c, GpuBackend* gpu,
                 const std::optional<TensorMap>& given_inputs = std::nullopt,
                 const std::optional<TensorMap>& expected = std::nullopt,
                 const std::string& source = "generated");

// What the checks of `c` look up beside their outputs (topk_set's scores, row_rel_l2's magnitudes):
// the tensors they name, taken from the reference run's inputs and its outputs before masking.
TensorMap topk_scores(const Component& component, const Case& c, const TensorMap& inputs, const TensorMap& reference);

std::string status_name(CaseStatus status);
nlohmann::json result_to_json(const CaseResult& result);
nlohmann::json comparison_to_json(const OutputComparison& c);

}  // namespace dsv4h
