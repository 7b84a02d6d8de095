// The one JSON form of a tensor, shared by `dsv4h run --dump`, `--inputs` and the fixtures, so
// that numpy or torch can read and write it:
//   {"dtype": "bf16", "shape": [2, 3], "data": [0.5, "nan", ...]}
// data is flat and row-major; floats (bf16 and fp8 as the values they encode) are numbers, NaN and
// infinities the strings "nan", "inf", "-inf"; integers are integers.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tensor.h"

namespace dsv4h {

nlohmann::json tensor_to_json(const HostTensor& t);
nlohmann::json tensors_to_json(const TensorMap& tensors);

// `where` names the place in the document for error messages, e.g. "cases/x.json: inputs.gate_up".
// Any problem is BadInput naming `where` and the field.
HostTensor tensor_from_json(const nlohmann::json& j, const std::string& where);
TensorMap tensors_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace dsv4h
