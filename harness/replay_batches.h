// What graph replay runs at each batch size n of one bucket (GpuBackend::graph_replay): the padded
// inputs and the reference's outputs on them at the bucket's case.
//
// Where a component's rows are independent (it has slice_batch, which does not refuse the case as
// BadInput, and every output maps to rows), the bucket's inputs and their reference are made once,
// and batch n takes the first n rows padded back to the bucket: its expected outputs are the bucket
// reference's first n rows and the reference of the padding rows alone. Making inputs (fp8 pools,
// one random latent a slot) and the fp64 reference cost per row, and the buckets hold ~26x fewer
// rows than 1 + 2 + ... + 256; what each n still checks fresh is the padding and the replay.
// Elsewhere every n gets inputs of its own.
#pragma once

#include <cstdint>
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

 private:
  const Component& component_;
  Case base_, bucket_case_;
  int64_t bucket_ = 0;
  bool shares_rows_ = false;
  TensorMap inputs_, reference_;
};

}  // namespace dsv4h
