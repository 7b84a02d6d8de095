// Bisection of a model forward (issue 31): a candidate's op-level trace (model/trace.h, from any
// backend) against the fp64 reference, op by op. The reference is run again with every op's
// outputs replaced by the candidate's (teacher forcing): each op then runs on exactly the
// candidate's inputs, its cache included, so its local error (the candidate's output against the
// reference op on the same inputs) is the op's own, and the first op in forward order whose local
// error crosses its budget (op_budgets.h) is the one that went wrong, whatever it passed on. Each
// op's drift (against the free-running reference: what it inherited and added) is recorded beside
// it, so the headroom of every layer is followed from run to run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/backend.h"
#include "model/trace.h"

namespace dsv4h {

using NamedRows = std::vector<std::pair<std::string, model::RowMatrix>>;

struct OpError {
  std::string op, layer;
  std::string output;     // the output nearest its budget (the worst one where over)
  int64_t calls = 0;
  double error = 0;       // its largest local error over the calls
  double budget = 0;
  double drift = 0;       // the op's largest error against the free-running reference, all outputs
  std::string component;  // whose fixture reproduces it; "" where none
  std::string problem;    // a call the candidate lacks or holds in another shape
  bool over() const { return error > budget; }
  double used() const;    // error / budget: the share of the budget used (infinite where 0 < error, budget 0)
};

// The call where the first op over budget first crossed it: its inputs (the candidate's, as the
// reference op received them), the reference op's outputs on them and the candidate's.
struct DivergentCall {
  int64_t request = 0, step = 0;
  NamedRows inputs, reference, candidate;
};

struct BisectResult {
  std::vector<OpError> ops;  // in forward order
  std::optional<size_t> first;  // the first op over budget
  std::optional<DivergentCall> divergent;
  std::string aborted;       // where the teacher-forced run could not go on (e.g. an id out of range)
  bool passed() const { return !first && aborted.empty(); }
};

// `candidate` is the trace of a run of `plan`. The reference's own trace (drift) is run here too.
BisectResult bisect(const model::ReferenceModel& reference, const model::RunPlan& plan, const model::Trace& candidate);

// Every op's error, budget, share used and drift, and the first divergent op.
nlohmann::json bisect_json(const BisectResult& result);
// One line per op, the first over budget marked; then, where one is over budget, a line naming it
// that begins with kMismatchMark (compare.h).
std::vector<std::string> bisect_table(const BisectResult& result);

}  // namespace dsv4h
