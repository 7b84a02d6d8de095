// Case files: the JSON form of a case, used for golden fixtures, shrunk property counterexamples
// (fixtures/regressions/) and `dsv4h run --case FILE / --dump`:
//   {"component": "filtered_silu_mul", "case": "filtered_silu_mul(rows=3,...)", "seed": 7,
//    "note": "...", "inputs": {NAME: tensor}, "outputs": {"expected"|"reference"|"gpu": {NAME: tensor}}}
// Only component and case are required; a seed given both in "case" and "seed" must agree.
// In outputs.expected, "nan" marks an element that must stay unwritten (fixtures hold finite
// inputs, so no correct run produces a NaN there).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "case_spec.h"
#include "json_file.h"
#include "tensor.h"

namespace dsv4h {

struct CaseFile {
  std::string path;
  Case test_case;
  std::optional<TensorMap> inputs;
  std::optional<TensorMap> expected;  // outputs.expected: what a correct run must produce
};

// BadInput naming the file and the field for every problem.
CaseFile load_case_file(const std::string& path);
// The same for a document already parsed; `path` names it in messages.
CaseFile case_file_from_json(const nlohmann::json& j, const std::string& path);

// The case document of a run, written as it goes (a run's tensors can be a GiB; as one JSON value
// in memory their text takes five times that). `note`, where not empty, says where the inputs came
// from. write_case_file creates the folders it needs; a failed write is a runtime_error.
void write_case_document(std::ostream& out, const Case& c, const TensorMap& inputs,
                         const std::map<std::string, TensorMap>& outputs_by_backend, const std::string& note = "");
void write_case_file(const std::string& path, const Case& c, const TensorMap& inputs,
                     const std::map<std::string, TensorMap>& outputs_by_backend, const std::string& note = "");

// The most bytes the case document of these inputs and outputs can take, before the outputs hold
// their values.
uint64_t case_document_bytes_bound(const TensorMap& inputs, const std::map<std::string, TensorMap>& outputs_by_backend);

// Where fixtures live: $DSV4H_FIXTURES, else ./fixtures if it exists, else beside an installed
// executable (PREFIX/share/dsv4h/fixtures), else the source tree's.
std::string fixtures_dir();

}  // namespace dsv4h
