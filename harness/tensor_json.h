// The one JSON form of a tensor, shared by `dsv4h run --dump`, `--inputs` and the fixtures, so
// that numpy or torch can read and write it:
//   {"dtype": "bf16", "shape": [2, 3], "data": [0.5, "nan", ...]}
// data is flat and row-major; floats (bf16 and fp8 as the values they encode) are numbers, NaN and
// infinities the strings "nan", "inf", "-inf"; integers are integers.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "tensor.h"

namespace dsv4h {

// Written element by element, never held as a JSON document (that takes about five times the
// text's size): `indent` starts each field's line.
void write_tensor_json(std::ostream& out, const HostTensor& t, const std::string& indent);
void write_tensors_json(std::ostream& out, const TensorMap& tensors, const std::string& indent);

// The most bytes write_tensors_json can write for these tensors: where `values_final` (inputs),
// integers counted exactly and floats at their longest; else (outputs before a run) every element
// at its dtype's longest.
uint64_t tensors_json_bytes_bound(const TensorMap& tensors, bool values_final);

// `where` names the place in the document for error messages, e.g. "cases/x.json: inputs.gate_up".
// Any problem is BadInput naming `where` and the field; so is a finite value beyond the dtype's
// finite range (3.4e38 for bf16, 448 for fp8_e4m3), which would otherwise turn into an infinity
// or a NaN unseen: infinities and NaN are written as such.
HostTensor tensor_from_json(const nlohmann::json& j, const std::string& where);
TensorMap tensors_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace dsv4h
