#include "trace.h"

#include <stdexcept>

namespace dsv4h::model {

void Trace::add(int64_t request, int64_t step, const std::string& op, OpRecord record) {
  if (!records_.emplace(std::make_tuple(request, step, op), std::move(record)).second)
    throw std::logic_error("trace: op " + op + " ran twice in request " + std::to_string(request) + "'s step " +
                           std::to_string(step));
  if (seen_.insert(op).second) order_.push_back(op);
}

const OpRecord* Trace::find(int64_t request, int64_t step, const std::string& op) const {
  const auto it = records_.find(std::make_tuple(request, step, op));
  return it == records_.end() ? nullptr : &it->second;
}

void TraceRecorder::begin_call(int64_t request, int64_t step) {
  request_ = request;
  step_ = step;
  if (next_) next_->begin_call(request, step);
}

void TraceRecorder::op(const std::string& name, const std::vector<OpInput>& inputs, const std::vector<OpOutput>& outputs) {
  OpRecord record;
  for (const OpOutput& o : outputs) record.outputs.emplace_back(o.name, *o.value);
  trace_.add(request_, step_, name, std::move(record));
  if (next_) next_->op(name, inputs, outputs);
}

}  // namespace dsv4h::model
