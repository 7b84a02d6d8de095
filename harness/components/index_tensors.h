// The components' input checks, and between the harness's int32 tensors and the references' Eigen
// index matrices (for the metadata components, attn_metadata and mtp_expand).
#pragma once

#include <string>
#include <vector>

#include "../../reference/attn_metadata.h"
#include "../tensor.h"

namespace dsv4h {

// A 1-D tensor becomes one column; a 2-D tensor keeps its shape.
reference::IndexMatrix to_index_matrix(const HostTensor& t);

// Writes rows [0, m.rows()) of `t` (an i32 tensor at least that long, as wide as m); later rows
// keep what they hold (the poison, when nobody may write them).
void write_rows(HostTensor& t, const reference::IndexMatrix& m);

// BadInput unless `inputs` holds `name` as a `dtype` tensor of `shape`; `component` prefixes the message.
void require_tensor(const std::string& component, const TensorMap& inputs, const std::string& name, DType dtype,
                    const Shape& shape);
inline void require_i32(const std::string& component, const TensorMap& inputs, const std::string& name,
                        const Shape& shape) {
  require_tensor(component, inputs, name, DType::i32, shape);
}

// BadInput naming the first input not among `names` (a misspelt one, or one of another component).
void reject_unknown_inputs(const std::string& component, const TensorMap& inputs, const std::vector<std::string>& names);

}  // namespace dsv4h
