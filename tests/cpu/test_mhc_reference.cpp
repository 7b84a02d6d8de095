// The mhc descriptor (harness/components/mhc.cpp) over the model's hc_pre and hc_post: the shape of
// what it makes, bad input, and for each of its mutants the proof that the verify cases tell the
// buggy math from the right one (the GPU run that catches the kernels' mutants comes later).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "harness/compare.h"
#include "harness/component.h"
#include "harness/poison.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

const Component& mhc() { return registry().get("mhc"); }

OutputCheck dtype_check(DType dtype) {
  OutputCheck check;
  check.tolerance = tolerance_for(dtype);
  return check;
}

// How many verify cases of `op` fail the descriptor's check of `output` when the reference runs on
// `mutant_case(c)` and `mutant_inputs(inputs)` instead: the mutant's math on the same inputs.
int cases_failed(int64_t op, const std::string& output, const std::function<Case(const Case&)>& mutant_case,
                 const std::function<TensorMap(const TensorMap&)>& mutant_inputs) {
  int failed = 0;
  for (const std::string& text : mhc().verify_cases) {
    const Case c = parse_case(text);
    if (c.integer("op") != op) continue;
    const TensorMap inputs = mhc().make_inputs(c);
    const TensorMap expected = reference_outputs(mhc(), c, inputs, Poison::a);
    const TensorMap got = reference_outputs(mhc(), mutant_case(c), mutant_inputs(inputs), Poison::b);
    const HostTensor& e = expected.at(output);
    failed += !compare_output(output, e, Poison::a, got.at(output), Poison::b, dtype_check(e.dtype())).passed();
  }
  return failed;
}

TensorMap same(const TensorMap& inputs) { return inputs; }
Case same_case(const Case& c) { return c; }

TEST(MhcMutants, TheReferenceAgainstItselfPasses) {
  EXPECT_EQ(cases_failed(0, "comb", same_case, same), 0);
  EXPECT_EQ(cases_failed(0, "x", same_case, same), 0);
  EXPECT_EQ(cases_failed(1, "h", same_case, same), 0);
}

// Sinkhorn is still moving at its last pass on every hc_pre case: one pass fewer changes comb by
// more than an fp32 ulp.
TEST(MhcMutants, SinkhornOneFewerFailsEveryPreCase) {
  const auto one_fewer = [](const Case& c) { return c.with("iters", std::to_string(c.integer("iters") - 1)); };
  EXPECT_EQ(cases_failed(0, "comb", one_fewer, same), 6);
}

TEST(MhcMutants, PostTransposedFailsEveryPostCase) {
  const auto transposed = [](const TensorMap& inputs) {
    TensorMap t = inputs;
    const HostTensor& comb = inputs.at("comb");
    for (int64_t token = 0; token < comb.shape()[0]; ++token)
      for (int64_t i = 0; i < 4; ++i)
        for (int64_t j = 0; j < 4; ++j) t.at("comb").set((token * 4 + i) * 4 + j, comb.get((token * 4 + j) * 4 + i));
    return t;
  };
  EXPECT_EQ(cases_failed(1, "h", same_case, transposed), 6);
}

// What hc_pre makes: post in (0, 2); comb ends on a column pass, so its columns sum to 1 less the
// eps each division adds.
TEST(MhcComponent, PreOutputsHaveTheSpecsShape) {
  const Case c = parse_case("mhc(op=0,tokens=16,dim=64)");
  const TensorMap out = reference_outputs(mhc(), c, mhc().make_inputs(c), Poison::a);
  for (int64_t i = 0; i < 16 * 4; ++i) {
    EXPECT_GT(out.at("post").get(i), 0.0);
    EXPECT_LT(out.at("post").get(i), 2.0);
  }
  for (int64_t t = 0; t < 16; ++t)
    for (int64_t j = 0; j < 4; ++j) {
      double column = 0;
      for (int64_t i = 0; i < 4; ++i) column += out.at("comb").get((t * 4 + i) * 4 + j);
      EXPECT_NEAR(column, 1.0, 1e-5);
    }
}

CaseStatus status_of(const std::string& text) { return run_case(mhc(), parse_case(text), nullptr).result.status; }

TEST(MhcComponent, ImpossibleCasesAreBadInput) {
  EXPECT_EQ(status_of("mhc(op=2)"), CaseStatus::bad_input);
  EXPECT_EQ(status_of("mhc(tokens=-1)"), CaseStatus::bad_input);
  EXPECT_EQ(status_of("mhc(dim=0)"), CaseStatus::bad_input);
  EXPECT_EQ(status_of("mhc(iters=0)"), CaseStatus::bad_input);
  EXPECT_EQ(status_of("mhc(op=1,tokens=0)"), CaseStatus::pass);
}

TEST(MhcComponent, WrongInputShapeIsBadInputNamingIt) {
  const Case c = parse_case("mhc(op=1,tokens=4,dim=8)");
  TensorMap inputs = mhc().make_inputs(c);
  inputs["comb"] = HostTensor(DType::f32, {4, 16});
  const CaseRun run = run_case(mhc(), c, nullptr, inputs);
  EXPECT_EQ(run.result.status, CaseStatus::bad_input);
  EXPECT_NE(run.result.message.find("\"comb\" is f32[4, 16], the case needs f32[4, 4, 4]"), std::string::npos)
      << run.result.message;
}

TEST(MhcComponent, UnknownInputIsBadInputNamingIt) {
  const Case c = parse_case("mhc(op=0,tokens=2,dim=8)");
  TensorMap inputs = mhc().make_inputs(c);
  inputs["os"] = HostTensor(DType::f32, {1});
  const CaseRun run = run_case(mhc(), c, nullptr, inputs);
  EXPECT_EQ(run.result.status, CaseStatus::bad_input);
  EXPECT_NE(run.result.message.find("unknown input \"os\""), std::string::npos) << run.result.message;
}

}  // namespace
}  // namespace dsv4h
