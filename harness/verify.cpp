#include "verify.h"

#include <chrono>
#include <cmath>

#include "errors.h"
#include "poison.h"

namespace dsv4h {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Bitwise checks compare every element exactly; the others each output under its own check.
void add_checks(CaseResult& r, const Component& component, const Case& c, const std::string& label,
                const TensorMap& expected, Poison expected_poison, const TensorMap& got, Poison got_poison,
                bool bitwise, const TensorMap& scores) {
  for (const auto& [name, e] : expected) {
    auto it = got.find(name);
    if (it == got.end()) throw std::logic_error(label + ": output \"" + name + "\" missing");
    const OutputCheck check = bitwise ? OutputCheck{} : output_check(component, c, name, e.dtype());
    r.checks.emplace_back(label, compare_output(name, e, expected_poison, it->second, got_poison, check, &scores));
    if (!r.checks.back().second.passed()) r.status = CaseStatus::fail;
  }
}

}  // namespace

TensorMap topk_scores(const Component& component, const Case& c, const TensorMap& inputs, const TensorMap& reference) {
  TensorMap scores;
  for (const auto& [name, out] : reference) {
    const OutputCheck check = output_check(component, c, name, out.dtype());
    if (check.scores.empty()) continue;
    const TensorMap& holder = reference.count(check.scores) ? reference : inputs;
    const auto it = holder.find(check.scores);
    if (it != holder.end()) scores.emplace(check.scores, it->second);
  }
  return scores;
}

std::string status_name(CaseStatus status) {
  switch (status) {
    case CaseStatus::pass: return "pass";
    case CaseStatus::fail: return "fail";
    case CaseStatus::bad_input: return "bad_input";
    case CaseStatus::error: return "error";
  }
  return "?";
}

CaseRun run_case(const Component& component, const Case& c, GpuBackend* gpu,
                 const std::optional<TensorMap>& given_inputs, const std::optional<TensorMap>& expected,
                 const std::string& source) {
  CaseRun run;
  CaseResult& r = run.result;
  r.component = component.name;
  r.case_text = c.str();
  r.source = source;
  r.backend = gpu ? "gpu" : "reference";
  r.device = gpu ? gpu->device_name() : "cpu";
  r.repro = "dsv4h run --case '" + (source == "generated" ? c.str() : source) + "'";
  try {
    run.inputs = given_inputs ? *given_inputs : component.make_inputs(c);
    TensorMap reference = checked_outputs(component, c, run.inputs);
    r.work = component.work(c, run.inputs);
    fill_poison(reference, Poison::a);
    auto t0 = std::chrono::steady_clock::now();
    component.reference(c, run.inputs, reference);
    r.reference_ms = ms_since(t0);
    // Before the masking: a check's magnitudes may be a reference-only (unchecked) output.
    const TensorMap scores = topk_scores(component, c, run.inputs, reference);
    mask_unchecked(component, c, reference, Poison::a);
    std::optional<TensorMap> stored = expected;  // a fixture's outputs: its "nan"s are poison a
    if (stored) {
      mask_unchecked(component, c, *stored, Poison::a);
      add_checks(r, component, c, "reference vs expected", *stored, Poison::a, reference, Poison::a, false, scores);
    }
    if (gpu) {
      t0 = std::chrono::steady_clock::now();
      TensorMap gpu_a = gpu->run(component, c, run.inputs, Poison::a);
      r.gpu_ms = ms_since(t0);
      TensorMap gpu_b = gpu->run(component, c, run.inputs, Poison::b);
      mask_unchecked(component, c, gpu_a, Poison::a);
      mask_unchecked(component, c, gpu_b, Poison::b);
      add_checks(r, component, c, "gpu vs reference", reference, Poison::a, gpu_a, Poison::a, false, scores);
      add_checks(r, component, c, "gpu poison a vs b", gpu_a, Poison::a, gpu_b, Poison::b, true, scores);
      if (stored) add_checks(r, component, c, "gpu vs expected", *stored, Poison::a, gpu_a, Poison::a, false, scores);
      run.outputs["gpu"] = std::move(gpu_a);
    }
    run.outputs["reference"] = std::move(reference);
  } catch (const BadInput& e) {
    r.status = CaseStatus::bad_input;
    r.message = e.what();
  } catch (const std::invalid_argument& e) {  // a launch wrapper's own size checks
    r.status = CaseStatus::bad_input;
    r.message = e.what();
  } catch (const std::exception& e) {
    r.status = CaseStatus::error;
    r.message = e.what();
  }
  return run;
}

std::string CaseResult::report() const {
  std::string s = status_name(status) + "  " + case_text + (source == "generated" ? "" : "  [" + source + "]");
  if (passed()) return s;
  if (!message.empty()) s += "\n  " + message;
  for (const auto& [label, cmp] : checks)
    if (!cmp.passed()) s += "\n  " + label + ": " + cmp.summary();
  return s + "\n  reproduce: " + repro;
}

nlohmann::json comparison_to_json(const OutputComparison& c) {
  nlohmann::json worst = nlohmann::json::array();
  for (const ElementMismatch& m : c.worst)
    worst.push_back({{"index", m.index}, {"expected", m.expected}, {"got", m.got},
                     {"error", format_value(m.error)}, {"allowed", m.allowed}});
  const nlohmann::json distribution = {
      {"elements", c.distribution_elements}, {"checked", c.distribution_checked}, {"passed", c.distribution_passed},
      {"exact_agreement_rate", c.exact_agreement_rate},
      {"min_exact_agreement_rate", c.distribution_bound.min_exact_rate},
      {"mean_signed_error_ulps", c.mean_signed_error_ulps},
      {"max_abs_mean_signed_error_ulps", c.distribution_bound.max_mean_ulps},
      {"min_elements", c.distribution_bound.min_elements}};
  return {{"output", c.output}, {"dtype", c.dtype}, {"tolerance", c.tolerance}, {"comparator", c.comparator},
          {"passed", c.passed()}, {"elements", c.elements}, {"compared", c.compared}, {"unwritten", c.unwritten},
          {"write_mismatches", c.write_mismatches}, {"value_mismatches", c.value_mismatches},
          {"tied_swaps", c.tied_swaps}, {"nan_expected", c.nan_expected}, {"nan_got", c.nan_got},
          {"inf_got", c.inf_got}, {"max_abs_error", c.max_abs_error}, {"max_rel_error", c.max_rel_error},
          {"rel_l2_error", c.rel_l2_error}, {"cosine", c.cosine},
          {"budget_used", std::isfinite(c.budget_used) ? nlohmann::json(c.budget_used) : nlohmann::json("inf")},
          {"distribution", distribution}, {"worst", worst}};
}

nlohmann::json result_to_json(const CaseResult& r) {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& [label, cmp] : r.checks) {
    nlohmann::json j = comparison_to_json(cmp);
    j["check"] = label;
    checks.push_back(j);
  }
  return {{"component", r.component}, {"case", r.case_text}, {"source", r.source}, {"backend", r.backend},
          {"device", r.device}, {"status", status_name(r.status)}, {"message", r.message},
          {"reference_ms", r.reference_ms}, {"gpu_ms", r.gpu_ms}, {"bytes_moved", r.work.bytes_moved},
          {"flops", r.work.flops}, {"reproduce", r.repro}, {"checks", checks}};
}

}  // namespace dsv4h
