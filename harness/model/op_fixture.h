// The component fixture of a model op (issue 31's bisection): the first divergent op's inputs (the
// candidate's, as the reference op received them; weights from the model) in the tensors of the
// registered component that computes it, with that component's reference outputs as
// outputs.expected, so that `dsv4h run --case FILE` reproduces the op alone on the GPU. Ops of
// rms_norm, mhc, moe_routing, moe, compressor and sparse_attention have one; op_budget(op).note says
// why another has none.
#pragma once

#include <optional>
#include <string>

#include "harness/case_spec.h"
#include "harness/tensor.h"
#include "harness/model/bisect.h"
#include "model/weights.h"

namespace dsv4h {

struct OpFixture {
  Case test_case;
  TensorMap inputs, expected;
};

// nullopt where the op maps to no component.
std::optional<OpFixture> op_fixture(const std::string& op, const NamedRows& inputs, const model::ModelConfig& config,
                                    const model::Weights& weights);

void write_op_fixture(const std::string& path, const OpFixture& fixture, const std::string& note);

}  // namespace dsv4h
