#include "fault_injection.h"

namespace dsv4h::model {

void FaultInjection::begin_call(int64_t request, int64_t step) {
  call_step_ = step;
  if (next_) next_->begin_call(request, step);
}

void FaultInjection::op(const std::string& name, const std::vector<OpInput>& inputs, const std::vector<OpOutput>& outputs) {
  if (name == op_ && (step_ == kEveryStep || step_ == call_step_)) {
    ++hits_;
    for (const OpOutput& o : outputs) {
      RowMatrix& v = *o.value;
      if (o.values == OpValues::real) {
        v *= 1 + delta_;
        continue;
      }
      for (int64_t r = 0; r < v.rows(); ++r) {
        int64_t last = -1;
        for (int64_t j = 0; j < v.cols(); ++j)
          if (v(r, j) >= 0) last = j;
        if (last > 0) v(r, last) = v(r, 0);
      }
    }
  }
  if (next_) next_->op(name, inputs, outputs);
}

}  // namespace dsv4h::model
