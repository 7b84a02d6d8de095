// The rms_norm descriptor (harness/components/rms_norm.cpp) over the shared reference: its inputs,
// padding and bad input, and for each of its mutants the proof that the verify cases tell the buggy
// fp32 math from the right one (the GPU run that catches the kernels' mutants comes later).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "harness/compare.h"
#include "harness/component.h"
#include "harness/poison.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

const Component& rms_norm() { return registry().get("rms_norm"); }

// The kernel's arithmetic in fp32 (kernels/rms_norm.hip), with `inverse_rms` (sum of squares, D,
// eps -> r) replaceable by a mutant's; the result rounded once to bf16 by the tensor.
using InverseRms = std::function<float(float, int64_t, float)>;
HostTensor fp32_model(const Case& c, const TensorMap& inputs, const InverseRms& inverse_rms) {
  const int64_t rows = c.integer("rows"), dim = c.integer("dim");
  const float eps = static_cast<float>(c.real("eps"));
  const HostTensor& x = inputs.at("x");
  const HostTensor& w = inputs.at("weight");
  HostTensor y(DType::bf16, {rows, dim});
  for (int64_t r = 0; r < rows; ++r) {
    float sum = 0;
    for (int64_t k = 0; k < dim; ++k) sum += static_cast<float>(x.get(r * dim + k)) * static_cast<float>(x.get(r * dim + k));
    const float inv = inverse_rms(sum, dim, eps);
    for (int64_t k = 0; k < dim; ++k)
      y.set(r * dim + k, static_cast<float>(w.get(k)) * (static_cast<float>(x.get(r * dim + k)) * inv));
  }
  return y;
}

// How many verify cases the fp32 math fails under the descriptor's own check of "y".
int cases_failed(const InverseRms& inverse_rms) {
  int failed = 0;
  for (const std::string& text : rms_norm().verify_cases) {
    const Case c = parse_case(text);
    const TensorMap inputs = rms_norm().make_inputs(c);
    const TensorMap expected = reference_outputs(rms_norm(), c, inputs, Poison::a);
    const HostTensor got = fp32_model(c, inputs, inverse_rms);
    OutputCheck check;
    check.tolerance = ToleranceClass::bf16_rounded_once;
    const OutputComparison cmp = compare_output("y", expected.at("y"), Poison::a, got, Poison::b, check);
    failed += !cmp.passed();
  }
  return failed;
}

TEST(RmsNormMutants, RightFp32MathPassesEveryVerifyCase) {
  EXPECT_EQ(cases_failed([](float sum, int64_t dim, float eps) {
              return 1.f / std::sqrt(sum / static_cast<float>(dim) + eps);
            }),
            0);
}

TEST(RmsNormMutants, EpsOutsideSqrtFailsAVerifyCase) {
  EXPECT_GT(cases_failed([](float sum, int64_t dim, float eps) {
              return 1.f / (std::sqrt(sum / static_cast<float>(dim)) + eps);
            }),
            0);
}

TEST(RmsNormMutants, MeanOverDimMinus1FailsAVerifyCase) {
  EXPECT_GT(cases_failed([](float sum, int64_t dim, float eps) {
              return 1.f / std::sqrt(sum / static_cast<float>(dim - 1) + eps);
            }),
            0);
}

TEST(RmsNormComponent, RowsSpreadOverTheRequestedScales) {
  const Case c = parse_case("rms_norm(rows=200,dim=512,min_scale=1e-3,max_scale=1)");
  const HostTensor x = rms_norm().make_inputs(c).at("x");
  double smallest = 1e9, largest = 0;
  for (int64_t r = 0; r < 200; ++r) {
    double sum = 0;
    for (int64_t k = 0; k < 512; ++k) sum += x.get(r * 512 + k) * x.get(r * 512 + k);
    const double rms = std::sqrt(sum / 512);
    smallest = std::min(smallest, rms);
    largest = std::max(largest, rms);
  }
  EXPECT_GT(smallest, 0.8e-3);
  EXPECT_LT(smallest, 2e-3);
  EXPECT_LT(largest, 1.2);
  EXPECT_GT(largest, 0.5);
}

TEST(RmsNormComponent, PaddingKeepsTheRealRowsAndAddsRandomOnes) {
  const Case c = parse_case("rms_norm(rows=3,dim=16)");
  const TensorMap inputs = rms_norm().make_inputs(c);
  const TensorMap padded = rms_norm().pad_batch(c, inputs, 8);
  ASSERT_EQ(padded.at("x").shape(), (Shape{8, 16}));
  for (int64_t i = 0; i < 3 * 16; ++i) EXPECT_EQ(padded.at("x").get(i), inputs.at("x").get(i));
  int64_t nonzero = 0;
  for (int64_t i = 3 * 16; i < 8 * 16; ++i) nonzero += padded.at("x").get(i) != 0;
  EXPECT_GT(nonzero, 5 * 16 - 4);
  for (int64_t k = 0; k < 16; ++k) EXPECT_EQ(padded.at("weight").get(k), inputs.at("weight").get(k));
}

CaseStatus status_of(const std::string& text) {
  return run_case(rms_norm(), parse_case(text), nullptr).result.status;
}

TEST(RmsNormComponent, ImpossibleShapesAreBadInput) {
  EXPECT_EQ(status_of("rms_norm(rows=-1)"), CaseStatus::bad_input);
  EXPECT_EQ(status_of("rms_norm(dim=0)"), CaseStatus::bad_input);
  EXPECT_EQ(status_of("rms_norm(eps=-1)"), CaseStatus::bad_input);
  EXPECT_EQ(status_of("rms_norm(min_scale=2,max_scale=1)"), CaseStatus::bad_input);
  EXPECT_EQ(status_of("rms_norm(rows=0)"), CaseStatus::pass);
}

TEST(RmsNormComponent, WrongWeightShapeIsBadInputNamingIt) {
  const Case c = parse_case("rms_norm(rows=4,dim=8)");
  TensorMap inputs = rms_norm().make_inputs(c);
  inputs["weight"] = HostTensor(DType::f32, {9});
  const CaseRun run = run_case(rms_norm(), c, nullptr, inputs);
  EXPECT_EQ(run.result.status, CaseStatus::bad_input);
  EXPECT_NE(run.result.message.find("\"weight\" is f32[9], the case needs f32[8]"), std::string::npos)
      << run.result.message;
}

}  // namespace
}  // namespace dsv4h
