// The host side of graph replay for every component, on the CPU: a batch padded to a bucket the
// way pad_batch pads it must pass the component's own input checks at the bucket's case, and the
// reference must run on it (graph replay compares each replay with exactly that reference).
#include <gtest/gtest.h>

#include "harness/component.h"
#include "harness/poison.h"

namespace dsv4h {
namespace {

TEST(ComponentPadding, PaddedBatchesAreValidInputsOfTheBucket) {
  for (const Component& component : registry().all()) {
    if (!component.pad_batch) continue;
    const Case base = parse_case(component.replay_case);
    for (int64_t n : {1, 3}) {
      const Case c = base.with(component.batch_param, std::to_string(n));
      const Case bucket = base.with(component.batch_param, "8");
      const TensorMap padded = component.pad_batch(c, component.make_inputs(c), 8);
      TensorMap outputs;
      ASSERT_NO_THROW(outputs = checked_outputs(component, bucket, padded)) << c.str() << " padded to 8";
      fill_poison(outputs, Poison::a);
      EXPECT_NO_THROW(component.reference(bucket, padded, outputs)) << c.str() << " padded to 8";
    }
  }
}

}  // namespace
}  // namespace dsv4h
