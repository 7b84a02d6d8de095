// Between the harness's int32 tensors and the references' Eigen index matrices, for the metadata
// components (attn_metadata, mtp_expand).
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

// BadInput unless `inputs` holds `name` as an i32 tensor of `shape`; `component` prefixes the message.
void require_i32(const std::string& component, const TensorMap& inputs, const std::string& name, const Shape& shape);

// BadInput naming the first input not among `names` (a misspelt one, or one of another component).
void reject_unknown_inputs(const std::string& component, const TensorMap& inputs, const std::vector<std::string>& names);

}  // namespace dsv4h
