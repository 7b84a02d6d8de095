// Properties of the filtered_silu_mul reference that hold for any batch: a row's output depends on
// its own inputs only (batch invariance), filtered rows stay unwritten, and the clamp bounds hold.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "harness/component.h"
#include "harness/poison.h"
#include "harness/property.h"

namespace dsv4h {
namespace {

TensorMap reference_outputs(const Case& c, const TensorMap& inputs) {
  return dsv4h::reference_outputs(registry().get("filtered_silu_mul"), c, inputs, Poison::a);
}

RC_GTEST_PROP(FilteredSiluMulReferenceProperty, RowsAreBatchInvariantAndFilteredRowsUnwritten, ()) {
  const int64_t rows = *property::boundary_size(1, 300, {16, 64});
  const int64_t inter = *rc::gen::element<int64_t>(1, 3, 8, 13, 64);
  const int64_t step = *rc::gen::element<int64_t>(1, 16, 64);
  const double kept = *rc::gen::element(0.0, 0.5, 1.0);
  const uint64_t seed = *rc::gen::inRange<uint64_t>(0, 1u << 30);
  const Case c = parse_case("filtered_silu_mul(rows=" + std::to_string(rows) + ",inter=" + std::to_string(inter) +
                            ",kept=" + std::to_string(kept) + ",step=" + std::to_string(step) +
                            ",adversarial=1,seed=" + std::to_string(seed) + ")");
  const TensorMap inputs = registry().get("filtered_silu_mul").make_inputs(c);
  const TensorMap batch = reference_outputs(c, inputs);
  const int64_t row = *rc::gen::inRange<int64_t>(0, rows);
  const bool filtered = inputs.at("expert_ids").data<int32_t>()[row / step] == -1;

  // The same row alone, as a batch of one with its own expert id.
  const Case alone = c.with("rows", "1").with("step", "1");
  TensorMap alone_inputs = {{"gate_up", inputs.at("gate_up").rows(row, row + 1)},
                            {"expert_ids", HostTensor(DType::i32, {1})}};
  alone_inputs.at("expert_ids").data<int32_t>()[0] = filtered ? -1 : 0;
  const TensorMap single = reference_outputs(alone, alone_inputs);
  for (int64_t k = 0; k < inter; ++k) {
    const uint64_t in_batch = batch.at("out").bits(row * inter + k);
    RC_ASSERT(in_batch == single.at("out").bits(k));
    RC_ASSERT(filtered == (in_batch == poison_bits(DType::bf16, Poison::a)));
    // |silu(min(g, 10))| <= 10 and |clamp(u)| <= 10; one bf16 rounding on top.
    if (!filtered) RC_ASSERT(std::fabs(batch.at("out").get(row * inter + k)) <= 100.5);
  }
}

}  // namespace
}  // namespace dsv4h
