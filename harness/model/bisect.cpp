#include "bisect.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <stdexcept>

#include "harness/compare.h"
#include "op_budgets.h"

namespace dsv4h {

namespace {

double share(double error, double budget) {
  if (budget > 0) return error / budget;
  return error > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

}  // namespace

double OpError::used() const { return share(error, budget); }

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// An exact output's error is the share of its elements that differ; any other's the largest row
// relative L2 error, a row's norm floored at 2^-10 of the largest row's so that a row near zero
// among large ones is not held to its own tiny scale.
double output_error(const OutputCheck& check, const model::RowMatrix& got, const model::RowMatrix& expected) {
  if (got.rows() != expected.rows() || got.cols() != expected.cols()) return kInf;
  if (got.size() == 0) return 0;
  if (check.tolerance == ToleranceClass::exact)
    return static_cast<double>((got.array() != expected.array()).count()) / static_cast<double>(got.size());
  const Eigen::VectorXd norms = expected.rowwise().norm();
  const double floor = std::max(norms.maxCoeff() * 0x1.0p-10, std::numeric_limits<double>::min());
  double worst = 0;
  for (int64_t r = 0; r < got.rows(); ++r) {
    const double e = (got.row(r) - expected.row(r)).norm() / std::max(norms(r), floor);
    worst = std::max(worst, std::isnan(e) ? kInf : e);
  }
  return worst;
}

const model::RowMatrix* find_output(const model::OpRecord* record, const std::string& name) {
  if (!record) return nullptr;
  for (const auto& [n, v] : record->outputs)
    if (n == name) return &v;
  return nullptr;
}

// The reference run on the candidate's values: measures each op's local error, then hands the
// candidate's outputs on in place of its own.
class TeacherForcing : public model::OpObserver {
 public:
  TeacherForcing(const model::Trace& candidate, const model::ModelConfig& config, BisectResult& result)
      : candidate_(candidate), config_(config), result_(result) {}

  void begin_call(int64_t request, int64_t step) override {
    request_ = request;
    step_ = step;
  }

  void op(const std::string& name, const std::vector<model::OpInput>& inputs,
          const std::vector<model::OpOutput>& outputs) override {
    const OpBudget budget = op_budget(name, config_);
    OpError& e = entry(name, budget);
    ++e.calls;
    const model::OpRecord* record = candidate_.find(request_, step_, name);
    bool crossed = false;
    for (const model::OpOutput& o : outputs) {
      const auto b = std::find_if(budget.outputs.begin(), budget.outputs.end(), [&](const OpOutputBudget& x) { return x.output == o.name; });
      if (b == budget.outputs.end()) throw std::logic_error("op_budget: op " + name + " has no budget for output " + o.name);
      const model::RowMatrix* theirs = find_output(record, o.name);
      const double error = theirs ? output_error(b->check, *theirs, *o.value) : kInf;
      if (!theirs && e.problem.empty())
        e.problem = "the candidate lacks output " + std::string(o.name) + " of request " + std::to_string(request_) +
                    "'s step " + std::to_string(step_);
      else if (theirs && error == kInf && e.problem.empty())
        e.problem = "output " + std::string(o.name) + " of request " + std::to_string(request_) + "'s step " +
                    std::to_string(step_) + " is [" + std::to_string(theirs->rows()) + ", " + std::to_string(theirs->cols()) +
                    "], the reference's [" + std::to_string(o.value->rows()) + ", " + std::to_string(o.value->cols()) + "]";
      const double limit = budget_of(b->check);
      if (e.output.empty() || share(error, limit) > e.used()) {
        e.error = error;
        e.budget = limit;
        e.output = o.name;
      }
      crossed = crossed || error > limit;
    }
    if (crossed && !captured_.count(name)) {
      DivergentCall call{request_, step_, {}, {}, {}};
      for (const model::OpInput& in : inputs) call.inputs.emplace_back(in.name, *in.value);
      for (const model::OpOutput& o : outputs) call.reference.emplace_back(o.name, *o.value);
      if (record) call.candidate = record->outputs;
      captured_.emplace(name, std::move(call));
    }
    for (const model::OpOutput& o : outputs)  // go on from the candidate's values
      if (const model::RowMatrix* theirs = find_output(record, o.name);
          theirs && theirs->rows() == o.value->rows() && theirs->cols() == o.value->cols())
        *o.value = *theirs;
  }

  const DivergentCall& captured(const std::string& op) const { return captured_.at(op); }

 private:
  OpError& entry(const std::string& name, const OpBudget& budget) {
    const auto it = index_.find(name);
    if (it != index_.end()) return result_.ops[it->second];
    index_.emplace(name, result_.ops.size());
    OpError e;
    e.op = name;
    e.layer = op_layer(name);
    e.component = budget.component;
    result_.ops.push_back(e);
    return result_.ops.back();
  }

  const model::Trace& candidate_;
  const model::ModelConfig& config_;
  BisectResult& result_;
  std::map<std::string, size_t> index_;
  std::map<std::string, DivergentCall> captured_;  // each op's first call over budget
  int64_t request_ = 0, step_ = 0;
};

// Each op's largest error against the free-running reference, over its calls and outputs.
void add_drift(const model::Trace& reference, const model::Trace& candidate, const model::RunPlan& plan,
               const model::ModelConfig& config, BisectResult& result) {
  for (OpError& e : result.ops) {
    const OpBudget budget = op_budget(e.op, config);
    for (int64_t r = 0; r < static_cast<int64_t>(plan.tokens.size()); ++r)
      for (int64_t s = 0; s < plan.steps(r); ++s) {
        const model::OpRecord* ours = reference.find(r, s, e.op);
        const model::OpRecord* theirs = candidate.find(r, s, e.op);
        if (!ours) continue;
        for (const OpOutputBudget& b : budget.outputs) {
          const model::RowMatrix* a = find_output(ours, b.output);
          const model::RowMatrix* c = find_output(theirs, b.output);
          if (a) e.drift = std::max(e.drift, c ? output_error(b.check, *c, *a) : kInf);
        }
      }
  }
}

}  // namespace

BisectResult bisect(const model::ReferenceModel& reference, const model::RunPlan& plan, const model::Trace& candidate) {
  BisectResult result;
  const model::ReferenceBackend backend(reference);
  TeacherForcing forcing(candidate, reference.config(), result);
  try {
    backend.run(plan, forcing);
  } catch (const std::exception& e) {
    result.aborted = e.what();
  }
  for (size_t i = 0; i < result.ops.size() && !result.first; ++i)
    if (result.ops[i].over()) result.first = i;
  if (result.first) result.divergent = forcing.captured(result.ops[*result.first].op);
  model::Trace own;
  model::TraceRecorder recorder(own);
  backend.run(plan, recorder);
  add_drift(own, candidate, plan, reference.config(), result);
  return result;
}

namespace {

// JSON holds no infinity: a share or error without bound is written as null.
nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

nlohmann::json bisect_json(const BisectResult& result) {
  nlohmann::json ops = nlohmann::json::array();
  for (const OpError& e : result.ops) {
    nlohmann::json j = {{"op", e.op},         {"layer", e.layer},       {"output", e.output},
                        {"calls", e.calls},   {"error", number(e.error)}, {"budget", e.budget},
                        {"used", number(e.used())}, {"drift", number(e.drift)}, {"over", e.over()},
                        {"component", e.component}};
    if (!e.problem.empty()) j["problem"] = e.problem;
    ops.push_back(std::move(j));
  }
  // Each layer's headroom: the op nearest its budget and the largest drift.
  nlohmann::json layers = nlohmann::json::array();
  std::map<std::string, size_t> at;
  for (const OpError& e : result.ops) {
    const std::string layer = e.layer.empty() ? "top" : e.layer;
    if (!at.count(layer)) {
      at[layer] = layers.size();
      layers.push_back({{"layer", layer}, {"most_used", 0.0}, {"op", e.op}, {"drift", 0.0}});
    }
    nlohmann::json& l = layers[at[layer]];
    if (!std::isfinite(e.used()) || e.used() > l["most_used"].get<double>()) {
      l["most_used"] = e.used();
      l["op"] = e.op;
    }
    if (!std::isfinite(e.drift) || e.drift > l["drift"].get<double>()) l["drift"] = e.drift;
  }
  for (auto& l : layers)
    for (const char* key : {"most_used", "drift"}) l[key] = number(l[key].get<double>());
  nlohmann::json j = {{"passed", result.passed()}, {"ops", std::move(ops)}, {"layers", std::move(layers)}};
  if (result.first) {
    const OpError& e = result.ops[*result.first];
    j["first_divergent"] = {{"op", e.op}, {"layer", e.layer}, {"output", e.output},
                            {"request", result.divergent->request}, {"step", result.divergent->step}};
  }
  if (!result.aborted.empty()) j["aborted"] = result.aborted;
  return j;
}

std::vector<std::string> bisect_table(const BisectResult& result) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < result.ops.size(); ++i) {
    const OpError& e = result.ops[i];
    char line[320];
    std::snprintf(line, sizeof(line), "  %s %-32s %-8s error %9.3g  budget %8.3g  used %8.3g  drift %9.3g%s%s",
                  result.first == i ? ">>" : "  ", e.op.c_str(), e.output.c_str(), e.error, e.budget, e.used(), e.drift,
                  e.problem.empty() ? "" : "  ", e.problem.c_str());
    lines.push_back(line);
  }
  // compare_output's mark of a wrong result: a model test failing on a budget prints this table.
  if (result.first) {
    const OpError& e = result.ops[*result.first];
    lines.push_back(std::string(kMismatchMark) + ": " + e.op + " (" + e.output + ") is the first op over its budget (used " +
                    std::to_string(e.used()) + ")");
  }
  return lines;
}

}  // namespace dsv4h
