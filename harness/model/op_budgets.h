// The model ops' budgets (issue 31's bisection): for each op of the forward and each of its
// outputs, the tolerance class (harness/tolerance.h) its error is held to, with the derivation
// written beside the table (op_budgets.cpp). Bisection (bisect.h) measures an op's *local* error:
// the candidate's output against the reference op run on the candidate's own inputs, so a budget
// is the op's own arithmetic's, never the errors it inherits.
#pragma once

#include <string>
#include <vector>

#include "harness/output_check.h"
#include "model/config.h"

namespace dsv4h {

// An op's name without its layer: "layers.2.attn.attend" -> "attn.attend", "mtp.0.head.proj" ->
// "head.proj"; and its layer: "layers.2", "mtp.0", or "" (embed, head).
std::string op_kind(const std::string& op);
std::string op_layer(const std::string& op);

struct OpOutputBudget {
  std::string output;
  OutputCheck check;  // comparator row_rel_l2, except exact outputs
};

struct OpBudget {
  std::vector<OpOutputBudget> outputs;
  std::string component;  // the registered component whose fixture reproduces the op, or ""
  std::string note;       // why the class; where no component, why none
};

// std::logic_error for an op the table lacks: every op the forward reports has its budget.
OpBudget op_budget(const std::string& op, const model::ModelConfig& config);

// The allowed error of an output: its class's row bound (allowed_row_rel_l2), 0 for exact.
double budget_of(const OutputCheck& check);

}  // namespace dsv4h
