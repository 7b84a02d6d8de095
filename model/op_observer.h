// The seam of bisection (issue 31): a forward reports every op it runs, by name
// ("embed", "layers.1.attn.attend", "mtp.0.head.proj"), with its inputs and outputs, to an
// observer, which may change the outputs in place before the forward goes on from them: fault
// injection (model/fault_injection.h) and bisection's teacher forcing (the reference run on a
// candidate's values, harness/model/bisect.h) both work so. A forward without an observer builds
// no name and copies nothing. A GPU forward fills the same calls with host copies of its outputs
// (model/backend.h), so that two forwards are compared op by op.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/weights.h"

namespace dsv4h::model {

// Integer-valued outputs (expert ids, selected entries, -1 where none) travel as doubles too.
enum class OpValues { real, index };

struct OpInput {
  const char* name;
  const RowMatrix* value;
};

struct OpOutput {
  const char* name;
  RowMatrix* value;
  OpValues values = OpValues::real;
};

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // A forward call starts: request `request`'s step `step` (0: its prefill, then one per decoded
  // token), the main model's ops and then its MTP block's over the same positions.
  virtual void begin_call(int64_t request, int64_t step) = 0;
  // Op `name` made `outputs` from `inputs` (rows: the call's tokens); the forward continues from
  // the outputs as the observer leaves them.
  virtual void op(const std::string& name, const std::vector<OpInput>& inputs, const std::vector<OpOutput>& outputs) = 0;
};

}  // namespace dsv4h::model
