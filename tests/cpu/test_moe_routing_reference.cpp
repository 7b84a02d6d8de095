// The moe_routing descriptor (harness/components/moe_routing.cpp) over the model's routing
// functions (model/block.h): the route scale left to the MoE's combine, the bias kept out of the
// weights, ties,
// bad input, and for each of its mutants the proof that the verify cases tell the buggy math from
// the right one (the GPU run that catches the kernel's mutants comes later).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "harness/compare.h"
#include "harness/component.h"
#include "harness/poison.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

const Component& routing() { return registry().get("moe_routing"); }

OutputCheck weights_check() {
  OutputCheck check;
  check.tolerance = ToleranceClass::fp32_rounded_once;
  return check;
}

// How many verify cases fail the descriptor's check of topk_weights when `mutate` rewrites the
// reference's weights (given the case, its inputs and the reference's outputs).
using Mutate = std::function<void(const Case&, const TensorMap&, TensorMap&)>;
int cases_failed(const Mutate& mutate) {
  int failed = 0;
  for (const std::string& text : routing().verify_cases) {
    const Case c = parse_case(text);
    const TensorMap inputs = routing().make_inputs(c);
    const TensorMap expected = reference_outputs(routing(), c, inputs, Poison::a);
    TensorMap got = expected;
    mutate(c, inputs, got);
    failed += !compare_output("topk_weights", expected.at("topk_weights"), Poison::a, got.at("topk_weights"),
                              Poison::a, weights_check())
                   .passed();
  }
  return failed;
}

// route_scale folded into the weights, which the MoE's combine scales again.
TEST(MoeRoutingMutants, RouteScaleTwiceFailsEveryCase) {
  EXPECT_EQ(cases_failed([](const Case& c, const TensorMap&, TensorMap& got) {
              HostTensor& w = got.at("topk_weights");
              for (int64_t i = 0; i < w.numel(); ++i) w.set(i, w.get(i) * c.real("route_scale"));
            }),
            static_cast<int>(routing().verify_cases.size()));
}

// The weights recomputed from score + bias of the same chosen experts.
TEST(MoeRoutingMutants, BiasInWeightsFailsEveryBiasedCase) {
  EXPECT_GE(cases_failed([](const Case& c, const TensorMap& inputs, TensorMap& got) {
              if (c.integer("hash")) return;
              const int64_t k = c.integer("topk"), experts = c.integer("experts");
              for (int64_t t = 0; t < c.integer("tokens"); ++t) {
                double biased[16], total = 0;
                for (int64_t j = 0; j < k; ++j) {
                  const int32_t e = got.at("topk_ids").data<int32_t>()[t * k + j];
                  const double l = inputs.at("logits").get(t * experts + e);
                  biased[j] = std::sqrt(l > 30 ? l : std::log1p(std::exp(l))) + inputs.at("bias").get(e);
                  total += biased[j];
                }
                for (int64_t j = 0; j < k; ++j) got.at("topk_weights").set(t * k + j, biased[j] / total);
              }
            }),
            5);
}

// Normalised only: the route scale is the combine's.
TEST(MoeRoutingComponent, WeightsSumToOne) {
  for (const char* text : {"moe_routing(tokens=20,experts=256,topk=6,route_scale=2.5)",
                                  "moe_routing(tokens=20,experts=8,topk=2,hash=1)"}) {
    const Case c = parse_case(text);
    const TensorMap out = reference_outputs(routing(), c, routing().make_inputs(c), Poison::a);
    const int64_t k = c.integer("topk");
    for (int64_t t = 0; t < 20; ++t) {
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += out.at("topk_weights").get(t * k + j);
      EXPECT_NEAR(sum, 1.0, 1e-6) << text;
    }
  }
}

// The bias moves the choice: with it the chosen experts are not simply the top scores.
TEST(MoeRoutingComponent, BiasMovesTheChoice) {
  const Case c = parse_case("moe_routing(tokens=64,experts=256,topk=6)");
  TensorMap inputs = routing().make_inputs(c);
  const TensorMap with_bias = reference_outputs(routing(), c, inputs, Poison::a);
  for (int64_t e = 0; e < 256; ++e) inputs.at("bias").set(e, 0.0);
  const TensorMap without = reference_outputs(routing(), c, inputs, Poison::a);
  int64_t differ = 0;
  for (int64_t i = 0; i < 64 * 6; ++i)
    differ += with_bias.at("topk_ids").data<int32_t>()[i] != without.at("topk_ids").data<int32_t>()[i];
  EXPECT_GT(differ, 64);
}

TEST(MoeRoutingComponent, TiesGoToTheLowerIdInDescendingOrder) {
  const Case c = parse_case("moe_routing(tokens=50,experts=256,topk=6,ties=1)");
  const TensorMap inputs = routing().make_inputs(c);
  const TensorMap out = reference_outputs(routing(), c, inputs, Poison::a);
  int64_t tied = 0;
  for (int64_t t = 0; t < 50; ++t)
    for (int64_t j = 1; j < 6; ++j) {
      const int32_t a = out.at("topk_ids").data<int32_t>()[t * 6 + j - 1], b = out.at("topk_ids").data<int32_t>()[t * 6 + j];
      const double la = inputs.at("logits").get(t * 256 + a), lb = inputs.at("logits").get(t * 256 + b);
      EXPECT_GE(la, lb);
      if (la == lb) {
        ++tied;
        EXPECT_LT(a, b);
      }
    }
  EXPECT_GT(tied, 100);
}

TEST(MoeRoutingComponent, HashLayersTakeTheTableRow) {
  const Case c = parse_case("moe_routing(tokens=30,experts=8,topk=2,hash=1,vocab=16)");
  const TensorMap inputs = routing().make_inputs(c);
  const TensorMap out = reference_outputs(routing(), c, inputs, Poison::a);
  for (int64_t t = 0; t < 30; ++t)
    for (int64_t j = 0; j < 2; ++j)
      EXPECT_EQ(out.at("topk_ids").data<int32_t>()[t * 2 + j],
                inputs.at("tid2eid").data<int32_t>()[inputs.at("token_ids").data<int32_t>()[t] * 2 + j]);
}

CaseStatus status_of(const std::string& text, const std::optional<TensorMap>& inputs = std::nullopt) {
  return run_case(routing(), parse_case(text), nullptr, inputs).result.status;
}

TEST(MoeRoutingComponent, ImpossibleCasesAreBadInput) {
  EXPECT_EQ(status_of("moe_routing(experts=0)"), CaseStatus::bad_input);
  EXPECT_EQ(status_of("moe_routing(experts=2000)"), CaseStatus::bad_input);
  EXPECT_EQ(status_of("moe_routing(experts=4,topk=5)"), CaseStatus::bad_input);
  EXPECT_EQ(status_of("moe_routing(hash=2)"), CaseStatus::bad_input);
  EXPECT_EQ(status_of("moe_routing(tokens=0)"), CaseStatus::pass);
}

TEST(MoeRoutingComponent, OutOfRangeTableEntryIsBadInputNamingIt) {
  const Case c = parse_case("moe_routing(tokens=4,experts=8,topk=2,hash=1,vocab=10)");
  TensorMap inputs = routing().make_inputs(c);
  inputs.at("tid2eid").data<int32_t>()[7] = 8;
  const CaseRun run = run_case(routing(), c, nullptr, inputs);
  EXPECT_EQ(run.result.status, CaseStatus::bad_input);
  EXPECT_NE(run.result.message.find("tid2eid[3, 1] = 8"), std::string::npos) << run.result.message;
}

}  // namespace
}  // namespace dsv4h
