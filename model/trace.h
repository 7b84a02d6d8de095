// A forward's op-level trace: every op's outputs for every call (request, step), kept by an
// OpObserver (TraceRecorder) from any backend, so that two forwards are compared op by op
// (harness/model/bisect.h). Ops are listed in the order they first ran: the forward's order.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "model/op_observer.h"

namespace dsv4h::model {

struct OpRecord {
  std::vector<std::pair<std::string, RowMatrix>> outputs;
};

class Trace {
 public:
  void add(int64_t request, int64_t step, const std::string& op, OpRecord record);
  const OpRecord* find(int64_t request, int64_t step, const std::string& op) const;
  const std::vector<std::string>& ops() const { return order_; }
  size_t calls_of_ops() const { return records_.size(); }

 private:
  std::map<std::tuple<int64_t, int64_t, std::string>, OpRecord> records_;
  std::vector<std::string> order_;
  std::set<std::string> seen_;
};

// Copies every op's outputs into `trace`, then hands the op to `next` (if any) unchanged.
class TraceRecorder : public OpObserver {
 public:
  explicit TraceRecorder(Trace& trace, OpObserver* next = nullptr) : trace_(trace), next_(next) {}
  void begin_call(int64_t request, int64_t step) override;
  void op(const std::string& name, const std::vector<OpInput>& inputs, const std::vector<OpOutput>& outputs) override;

 private:
  Trace& trace_;
  OpObserver* next_;
  int64_t request_ = 0, step_ = 0;
};

}  // namespace dsv4h::model
