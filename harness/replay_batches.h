// What graph replay runs at each batch size n of one bucket (GpuBackend::graph_replay): the padded
// inputs and the reference's outputs on them at the bucket's case.
//
// Where a component's rows are independent (it has slice_batch, which does not refuse the case as
// BadInput, and every output maps to rows), the bucket's inputs and their reference are made once,
// and batch n takes the first n rows padded back to the bucket: its expected outputs are the bucket
// reference's first n rows and the reference of the padding rows alone. Making inputs (fp8 pools,
// one random latent a slot) and the fp64 reference cost per row, and the buckets hold ~26x fewer
// rows than 1 + 2 + ... + 256. The padding rows' reference is batch 1's padding rows where batch n
// pads alike (padding_reference); what each n still checks fresh is the replay.
// Elsewhere every n gets inputs of its own.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "component.h"

namespace dsv4h {

struct ReplayBatch {
  std::string label;  // reproduces the batch: a case, or rows of the bucket's case
  TensorMap padded;   // inputs at the bucket's shapes
  TensorMap reference;
};

class BucketBatches {
 public:
  // Batch n's own inputs (where rows are not shared) are seeded base's seed + n; the bucket's, base's
  // seed + bucket.
  BucketBatches(const Component& component, const Case& base, int64_t bucket);
  ReplayBatch at(int64_t n) const;
  int64_t bucket() const { return bucket_; }
  bool shares_rows() const { return shares_rows_; }
  // How many times at() ran the reference on padding rows of its own (not batch 1's rows).
  int64_t padding_references_run() const { return padding_references_run_; }

 private:
  TensorMap padding_reference(const BatchSlice& padding, int64_t n) const;

  const Component& component_;
  Case base_, bucket_case_;
  int64_t bucket_ = 0;
  bool shares_rows_ = false;
  TensorMap inputs_, reference_;
  // Batch 1 padded to the bucket, and the reference of its padding rows [1, bucket) with the row
  // each output's part starts at: the padding of every other n where it is the same rows.
  TensorMap one_row_padded_, padding_reference_;
  std::map<std::string, int64_t> padding_rows_;
  mutable int64_t padding_references_run_ = 0;
};

}  // namespace dsv4h
