// A known fault in one op of a forward (issue 31's bisection test): every call of op `op` (or only
// its calls of step `step`, a decode step's fault as a replayed graph might make it) has its
// outputs perturbed before the forward goes on from them, real outputs scaled by 1 + delta, index
// outputs (expert ids, selected entries) with each row's last valid entry replaced by its first (a
// duplicate: still a valid id or entry, but another choice). Bisection must name exactly that op.
#pragma once

#include <cstdint>
#include <string>

#include "model/op_observer.h"

namespace dsv4h::model {

class FaultInjection : public OpObserver {
 public:
  static constexpr int64_t kEveryStep = -1;
  FaultInjection(std::string op, double delta, OpObserver* next = nullptr, int64_t step = kEveryStep)
      : op_(std::move(op)), delta_(delta), next_(next), step_(step) {}
  void begin_call(int64_t request, int64_t step) override;
  void op(const std::string& name, const std::vector<OpInput>& inputs, const std::vector<OpOutput>& outputs) override;
  // The calls of the op perturbed: 0 when no op of that name ran.
  int64_t hits() const { return hits_; }

 private:
  std::string op_;
  double delta_;
  OpObserver* next_;
  int64_t step_, call_step_ = 0;
  int64_t hits_ = 0;
};

}  // namespace dsv4h::model
