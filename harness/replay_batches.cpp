#include "replay_batches.h"

#include <cstring>
#include <map>
#include <stdexcept>
#include <utility>

#include "errors.h"
#include "poison.h"

namespace dsv4h {
namespace {

// True where the bucket's expected outputs can be assembled row by row: the case can be sliced (a
// component refuses some, BadInput: prefill metadata), and a slice of the whole bucket maps every
// output to rows, but for one the reference leaves all poison (a kernel's scratch), which is the
// same whatever the rows.
bool rows_cover_outputs(const Component& component, const Case& bucket_case, const TensorMap& inputs,
                        const TensorMap& reference) {
  std::map<std::string, int64_t> output_rows;
  try {
    output_rows = component.slice_batch(bucket_case, inputs, 0, bucket_case.integer(component.batch_param)).output_rows;
  } catch (const BadInput&) {
    return false;
  }
  for (const auto& [name, out] : reference) {
    if (output_rows.count(name) && !out.shape().empty()) continue;
    for (int64_t i = 0; i < out.numel(); ++i)
      if (!is_poison(out, i, Poison::a)) return false;
  }
  return true;
}

// Writes `part` (a slice's output) into `whole` from row `first` on.
void put_rows(HostTensor& whole, const HostTensor& part, int64_t first, const std::string& name) {
  const size_t row_bytes = whole.shape()[0] ? whole.nbytes() / static_cast<size_t>(whole.shape()[0]) : 0;
  if (part.nbytes() % (row_bytes ? row_bytes : 1) ||
      static_cast<size_t>(first) * row_bytes + part.nbytes() > whole.nbytes())
    throw std::logic_error("graph replay: the padding rows' output \"" + name + "\" does not fit its rows");
  std::memcpy(whole.bytes() + static_cast<size_t>(first) * row_bytes, part.bytes(), part.nbytes());
}

// True where the two input sets hold the same tensors, byte for byte.
bool same_inputs(const TensorMap& a, const TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    const auto it = b.find(name);
    if (it == b.end() || it->second.dtype() != t.dtype() || it->second.shape() != t.shape() ||
        std::memcmp(it->second.bytes(), t.bytes(), t.nbytes()) != 0)
      return false;
  }
  return true;
}

}  // namespace

BucketBatches::BucketBatches(const Component& component, const Case& base, int64_t bucket)
    : component_(component),
      base_(base),
      bucket_case_(base.with(component.batch_param, std::to_string(bucket)).with_seed(base.seed() + static_cast<uint64_t>(bucket))),
      bucket_(bucket) {
  if (!component.pad_batch) throw std::logic_error(component.name + " has no pad_batch: graph replay needs one");
  if (!component.slice_batch) return;
  inputs_ = component.make_inputs(bucket_case_);
  reference_ = reference_outputs(component, bucket_case_, inputs_, Poison::a);
  shares_rows_ = rows_cover_outputs(component, bucket_case_, inputs_, reference_);
  if (!shares_rows_) {  // each batch makes its own
    inputs_.clear();
    reference_.clear();
    return;
  }
  if (bucket_ < 2) return;
  const BatchSlice first = component_.slice_batch(bucket_case_, inputs_, 0, 1);
  one_row_padded_ = component_.pad_batch(first.c, first.inputs, bucket_);
  const BatchSlice padding = component_.slice_batch(bucket_case_, one_row_padded_, 1, bucket_);
  padding_reference_ = reference_outputs(component_, padding.c, padding.inputs, Poison::a);
  padding_rows_ = padding.output_rows;
}

TensorMap BucketBatches::padding_reference(const BatchSlice& padding, int64_t n) const {
  // The padding of batch n is the last rows of batch 1's where the component pads every row alike
  // (a padding row's inputs do not depend on n); its reference is then those rows of batch 1's
  // padding reference, and the cost of 1 + 2 + ... + bucket padding rows is one bucket's.
  if (!padding_reference_.empty() &&
      same_inputs(padding.inputs, component_.slice_batch(bucket_case_, one_row_padded_, n, bucket_).inputs)) {
    TensorMap rows;
    for (const auto& [name, first] : padding.output_rows) {
      const HostTensor& cached = padding_reference_.at(name);
      const int64_t skip = first - padding_rows_.at(name);
      const size_t row_bytes = cached.shape()[0] ? cached.nbytes() / static_cast<size_t>(cached.shape()[0]) : 0;
      Shape shape = cached.shape();
      shape[0] -= skip;
      HostTensor part(cached.dtype(), shape);
      std::memcpy(part.bytes(), cached.bytes() + static_cast<size_t>(skip) * row_bytes, part.nbytes());
      rows.emplace(name, std::move(part));
    }
    return rows;
  }
  ++padding_references_run_;
  return reference_outputs(component_, padding.c, padding.inputs, Poison::a);
}

ReplayBatch BucketBatches::at(int64_t n) const {
  ReplayBatch b;
  if (!shares_rows_) {
    const Case c = base_.with(component_.batch_param, std::to_string(n)).with_seed(base_.seed() + static_cast<uint64_t>(n));
    b.label = c.str();
    b.padded = component_.pad_batch(c, component_.make_inputs(c), bucket_);
    b.reference = reference_outputs(component_, bucket_case_, b.padded, Poison::a);
    return b;
  }
  const BatchSlice real = component_.slice_batch(bucket_case_, inputs_, 0, n);
  b.label = "rows [0, " + std::to_string(n) + ") of " + bucket_case_.str();
  b.padded = component_.pad_batch(real.c, real.inputs, bucket_);
  b.reference = reference_;
  if (n == bucket_) return b;
  const BatchSlice padding = component_.slice_batch(bucket_case_, b.padded, n, bucket_);
  for (const auto& [name, part] : padding_reference(padding, n)) {
    if (!padding.output_rows.count(name)) continue;  // left all poison (rows_cover_outputs)
    HostTensor& whole = b.reference.at(name);
    const int64_t first = padding.output_rows.at(name);
    if (first + part.shape()[0] != whole.shape()[0])
      throw std::logic_error("graph replay: " + component_.name + "'s padding rows of output \"" + name +
                             "\" do not end its rows");
    put_rows(whole, part, first, name);
  }
  return b;
}

}  // namespace dsv4h
