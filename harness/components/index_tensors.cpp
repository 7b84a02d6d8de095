#include "index_tensors.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "../errors.h"

namespace dsv4h {

reference::IndexMatrix to_index_matrix(const HostTensor& t) {
  if (t.dtype() != DType::i32 || t.shape().empty() || t.shape().size() > 2)
    throw std::logic_error("to_index_matrix: needs a 1-D or 2-D i32 tensor");
  const int64_t cols = t.shape().size() == 2 ? t.shape()[1] : 1;
  reference::IndexMatrix m(t.shape()[0], cols);
  if (m.size()) std::memcpy(m.data(), t.data<int32_t>(), static_cast<size_t>(m.size()) * 4);
  return m;
}

void write_rows(HostTensor& t, const reference::IndexMatrix& m) {
  const int64_t cols = t.shape().size() == 2 ? t.shape()[1] : 1;
  if (t.dtype() != DType::i32 || m.cols() != cols || m.rows() > t.shape()[0])
    throw std::logic_error("write_rows: " + std::to_string(m.rows()) + "x" + std::to_string(m.cols()) +
                           " rows do not fit " + shape_string(t.shape()));
  if (m.size()) std::memcpy(t.data<int32_t>(), m.data(), static_cast<size_t>(m.size()) * 4);
}

void require_tensor(const std::string& component, const TensorMap& inputs, const std::string& name, DType dtype,
                    const Shape& shape) {
  const auto it = inputs.find(name);
  if (it == inputs.end()) throw BadInput(component + ": input \"" + name + "\" is missing");
  if (it->second.dtype() != dtype || it->second.shape() != shape)
    throw BadInput(component + ": input \"" + name + "\" is " + dtype_name(it->second.dtype()) +
                   shape_string(it->second.shape()) + ", the case needs " + dtype_name(dtype) + shape_string(shape));
}

void reject_unknown_inputs(const std::string& component, const TensorMap& inputs, const std::vector<std::string>& names) {
  for (const auto& [name, t] : inputs) {
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    std::string known;
    for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
    throw BadInput(component + ": unknown input \"" + name + "\" (inputs: " + known + ")");
  }
}

}  // namespace dsv4h
