// The host side of graph replay for every component, on the CPU: a batch padded to a bucket the
// way pad_batch pads it must pass the component's own input checks at the bucket's case, and the
// reference must run on it (graph replay compares each replay with exactly that reference); and
// every padded input must have exactly the shape of the bucket's own inputs, since graph replay
// uploads it into the buffers captured at the bucket (a pool sized by the batch's random contents
// passed the input checks but not the upload). And where replay takes a batch's rows from its
// bucket's (replay_batches.h), the outputs it expects are exactly the reference's on the padded batch.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/component.h"
#include "harness/poison.h"
#include "harness/replay_batches.h"

namespace dsv4h {
namespace {

TEST(ComponentPadding, PaddedBatchesAreValidInputsOfTheBucket) {
  for (const Component& component : registry().all()) {
    if (!component.pad_batch) continue;
    const Case base = parse_case(component.replay_case);
    const Case bucket = base.with(component.batch_param, "8");
    const TensorMap captured = component.make_inputs(bucket);
    for (int64_t n : {1, 3, 5, 8}) {
      const Case c = base.with(component.batch_param, std::to_string(n));
      const TensorMap padded = component.pad_batch(c, component.make_inputs(c), 8);
      ASSERT_EQ(padded.size(), captured.size()) << c.str() << " padded to 8";
      for (const auto& [name, t] : captured) {
        ASSERT_TRUE(padded.count(name)) << c.str() << " padded to 8 lacks " << name;
        EXPECT_EQ(padded.at(name).dtype(), t.dtype()) << c.str() << " padded to 8: " << name;
        EXPECT_EQ(padded.at(name).shape(), t.shape()) << c.str() << " padded to 8: " << name;
      }
      TensorMap outputs;
      ASSERT_NO_THROW(outputs = checked_outputs(component, bucket, padded)) << c.str() << " padded to 8";
      fill_poison(outputs, Poison::a);
      EXPECT_NO_THROW(component.reference(bucket, padded, outputs)) << c.str() << " padded to 8";
    }
  }
}

TEST(ComponentPadding, SharedBucketRowsExpectTheReferenceOfThePaddedBatch) {
  std::vector<std::string> sharing;
  for (const Component& component : registry().all()) {
    if (!component.pad_batch) continue;
    const Case base = parse_case(component.replay_case);
    const Case bucket = base.with(component.batch_param, "8").with_seed(base.seed() + 8);
    const BucketBatches batches(component, base, 8);
    if (batches.shares_rows()) sharing.push_back(component.name);
    for (int64_t n : {1, 3, 5, 8}) {
      const ReplayBatch b = batches.at(n);
      const TensorMap full = reference_outputs(component, bucket, b.padded, Poison::a);
      ASSERT_EQ(b.reference.size(), full.size()) << b.label;
      for (const auto& [name, t] : full) {
        const HostTensor& got = b.reference.at(name);
        ASSERT_EQ(got.shape(), t.shape()) << b.label << ": " << name;
        EXPECT_EQ(std::memcmp(got.bytes(), t.bytes(), t.nbytes()), 0) << b.label << ": output " << name << " differs";
      }
    }
    // sparse_attention pads every row alike: each batch's padding is batch 1's last rows, so its
    // replay runs no reference of its own per batch (the 2026-12-06 GPU run spent 280 s on them).
    if (component.name == "sparse_attention") {
      EXPECT_EQ(batches.padding_references_run(), 0);
    }
  }
  // The two whose inputs cost most a row (fp8 pools) must share; so must every one with slice_batch
  // whose outputs are rows.
  for (const char* name : {"indexer", "sparse_attention", "filtered_silu_mul", "moe", "rms_norm"})
    EXPECT_NE(std::find(sharing.begin(), sharing.end(), name), sharing.end()) << name << " does not share its bucket's rows";
}

// A case whose slice_batch refuses to slice (prefill metadata: rows per request vary) replays with
// inputs of each batch's own, as before; the 2026-12-06 GPU run threw here instead.
TEST(ComponentPadding, CasesThatCannotSliceGetTheirOwnInputs) {
  const Component& component = registry().get("attn_metadata");
  const Case base = parse_case("attn_metadata(bs=1,mode=1,extend=5,ctx=1024,max_seq_len=700)");
  const BucketBatches batches(component, base, 4);
  EXPECT_FALSE(batches.shares_rows());
  const ReplayBatch b = batches.at(3);
  const Case own = base.with("bs", "3").with_seed(base.seed() + 3);
  EXPECT_EQ(b.label, own.str());
  // Batch 3's own inputs (its case, its seed) lead the padded ones: not rows of the bucket's.
  for (const auto& [name, t] : component.make_inputs(own)) {
    const HostTensor& padded = b.padded.at(name);
    ASSERT_LE(t.nbytes(), padded.nbytes()) << name;
    EXPECT_EQ(std::memcmp(padded.bytes(), t.bytes(), t.nbytes()), 0) << name;
  }
  // The outputs expected are the bucket's (4 requests' shapes), as the captured graph writes them.
  const TensorMap bucket_outputs = component.make_outputs(base.with("bs", "4"));
  ASSERT_EQ(b.reference.size(), bucket_outputs.size());
  for (const auto& [name, t] : bucket_outputs) EXPECT_EQ(b.reference.at(name).shape(), t.shape()) << name;
}

}  // namespace
}  // namespace dsv4h
