// The seam between a model case and the forward that runs it (issue 31): a backend runs a plan's
// requests and reports every op of every call to an observer (model/op_observer.h). The fp64
// reference is one backend; the GPU forward is to be another, reporting the same ops by the same
// names with host copies of its outputs, so that bisection (harness/model/bisect.h) compares the
// two op by op and names the first that crosses its budget.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/forward.h"
#include "model/op_observer.h"

namespace dsv4h::model {

// A model case's requests: each prefilled over its first `prompt` tokens, then decoded one token at
// a time. Call (r, 0) is request r's prefill, call (r, s) its s-th decode step; each runs the main
// model and then the first MTP block over the call's positions that have a next token.
struct RunPlan {
  std::vector<std::vector<int64_t>> tokens;
  int64_t prompt = 1;

  int64_t steps(int64_t request) const;
  // The positions [begin, end) of a request's call `step`.
  std::pair<int64_t, int64_t> positions(int64_t step) const;
};

class ModelBackend {
 public:
  virtual ~ModelBackend() = default;
  virtual std::string name() const = 0;
  // Every call of the plan, each opened by observer.begin_call(r, s) and then its ops in forward
  // order. Calls of one request come in step order; across requests, in the backend's order. A
  // batched forward reports each request's rows of a batched op as that request's call, with the
  // reference's shapes (model/attention.h and block.h name each op's outputs and their rows).
  virtual void run(const RunPlan& plan, OpObserver& observer) const = 0;
};

// Request by request, or step by step across the requests (as a batch runs them).
enum class CallOrder { request_major, step_major };

class ReferenceBackend : public ModelBackend {
 public:
  explicit ReferenceBackend(const ReferenceModel& model, CallOrder order = CallOrder::request_major)
      : model_(model), order_(order) {}
  std::string name() const override { return "reference"; }
  void run(const RunPlan& plan, OpObserver& observer) const override;

 private:
  const ReferenceModel& model_;
  CallOrder order_;
};

}  // namespace dsv4h::model
