// Consistency relations on the reference: every declared relation case holds, and each relation
// fails on a run that breaks what it states (a row that reads its neighbour, requests expanded out
// of order, a first row broadcast, a step that forgets the pool an earlier step wrote): a check that cannot fail is a
// defect. Also the relation case grammar.
#include <gtest/gtest.h>

#include <algorithm>

#include "harness/component.h"
#include "harness/errors.h"
#include "harness/poison.h"
#include "harness/relation.h"

namespace dsv4h {
namespace {

bool failed_on_reference(const CaseResult& r) {
  for (const auto& [label, cmp] : r.checks)
    if (!cmp.passed() && label.rfind("reference: ", 0) == 0) return true;
  return false;
}

TEST(RelationCase, CanonicalStringHasEveryParameterAndTheSeed) {
  const RelationCase rc = parse_relation_case("batch_invariance:filtered_silu_mul(rows=77,seed=3)");
  EXPECT_EQ(rc.str(), "batch_invariance(chunks=3):filtered_silu_mul(rows=77,inter=2048,kept=0.5,step=1,limit=10,adversarial=0,seed=3)");
  EXPECT_EQ(parse_relation_case(rc.str()).str(), rc.str());
  EXPECT_EQ(parse_relation_case("split(at=100):memory_pool(tokens=300)", 7).str(),
            "split(at=100,every=0):" + parse_case("memory_pool(tokens=300,seed=7)").str());
}

TEST(RelationCase, TellsRelationCasesFromComponentCases) {
  EXPECT_TRUE(is_relation_case("split(at=1):memory_pool"));
  EXPECT_TRUE(is_relation_case("batch_invariance:mtp_expand(bs=3)"));
  EXPECT_FALSE(is_relation_case("mtp_expand(bs=3)"));
  EXPECT_FALSE(is_relation_case("fixtures/memory_pool/golden-step-three-layers.json"));
}

TEST(RelationCase, BadRelationsAreBadInput) {
  EXPECT_THROW(parse_relation_case("shuffle:mtp_expand"), BadInput);
  EXPECT_THROW(parse_relation_case("split(after=3):mtp_expand"), BadInput);
  EXPECT_THROW(parse_relation_case("split(at=3):no_such_component"), BadInput);
  const auto status = [](const std::string& text) {
    const RelationCase rc = parse_relation_case(text);
    return run_relation(registry().get(rc.subject.component()), rc, nullptr).status;
  };
  EXPECT_EQ(status("split(at=3,every=2):mtp_expand(bs=8)"), CaseStatus::bad_input);  // both given
  EXPECT_EQ(status("split(at=8):mtp_expand(bs=8)"), CaseStatus::bad_input);          // not inside the batch
  EXPECT_EQ(status("batch_invariance:mtp_expand(bs=1)"), CaseStatus::bad_input);      // nothing to split
  EXPECT_EQ(status("batch_invariance:filtered_silu_mul(rows=40,step=4)"), CaseStatus::bad_input);
  EXPECT_EQ(status("batch_invariance:attn_metadata(bs=8,mode=1)"), CaseStatus::bad_input);  // prefill packs rows
  Component unsliced = registry().get("mtp_expand");
  unsliced.slice_batch = nullptr;
  EXPECT_EQ(run_relation(unsliced, parse_relation_case("batch_invariance:mtp_expand(bs=8)"), nullptr).status,
            CaseStatus::bad_input);
}

TEST(Relations, EveryDeclaredRelationCaseHoldsOnTheReference) {
  int declared = 0;
  for (const Component& component : registry().all())
    for (const std::string& text : component.relation_cases) {
      const CaseResult r = run_relation(component, parse_relation_case(text), nullptr);
      EXPECT_TRUE(r.passed()) << r.report();
      EXPECT_EQ(r.repro, "dsv4h run --case '" + r.case_text + "'");
      ++declared;
    }
  EXPECT_GE(declared, 9);
}

TEST(Relations, SplitAtEveryRowAndAnyPointHolds) {
  const Component& pool = registry().get("memory_pool");
  for (const char* text : {"split(every=1):memory_pool(tokens=9,per_request=3,seed=4)",
                           "split(every=4):memory_pool(tokens=9,per_request=9,order=2,seed=5)",
                           "split(at=1):memory_pool(tokens=9,per_request=9,seed=6)",
                           "batch_invariance(chunks=9):memory_pool(tokens=9,per_request=2,seed=7)"}) {
    const CaseResult r = run_relation(pool, parse_relation_case(text), nullptr);
    EXPECT_TRUE(r.passed()) << r.report();
  }
}

// Row r of the broken output is row r - 1 of the real one: within a sub-batch its first row reads
// nothing, in the whole batch it reads its neighbour.
TEST(Relations, BatchInvarianceFailsWhenARowReadsItsNeighbour) {
  Component broken = registry().get("filtered_silu_mul");
  broken.reference = [real = broken.reference](const Case& c, const TensorMap& inputs, TensorMap& outputs) {
    real(c, inputs, outputs);
    HostTensor& out = outputs.at("out");
    const int64_t inter = out.shape()[1];
    for (int64_t r = out.shape()[0] - 1; r > 0; --r)
      for (int64_t k = 0; k < inter; ++k) out.set_bits(r * inter + k, out.bits((r - 1) * inter + k));
  };
  const CaseResult r = run_relation(broken, parse_relation_case("batch_invariance:filtered_silu_mul(rows=40,inter=64,kept=1)"), nullptr);
  EXPECT_EQ(r.status, CaseStatus::fail);
  EXPECT_TRUE(failed_on_reference(r)) << r.report();
}

// The draft rows of the broken expansion are request-major in reverse: a request's rows move when
// its neighbours change.
TEST(Relations, BatchInvarianceFailsWhenRequestsMove) {
  Component broken = registry().get("mtp_expand");
  broken.reference = [real = broken.reference](const Case& c, const TensorMap& inputs, TensorMap& outputs) {
    TensorMap reversed;
    for (const auto& [name, t] : inputs) {
      HostTensor flipped = t;
      const int64_t rows = t.shape()[0], cols = t.numel() / std::max<int64_t>(rows, 1);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < cols; ++k) flipped.set_bits(r * cols + k, t.bits((rows - 1 - r) * cols + k));
      reversed.emplace(name, std::move(flipped));
    }
    real(c, reversed, outputs);
  };
  const CaseResult r = run_relation(broken, parse_relation_case("batch_invariance(chunks=4):mtp_expand(bs=20,topk=2)"), nullptr);
  EXPECT_EQ(r.status, CaseStatus::fail);
  EXPECT_TRUE(failed_on_reference(r)) << r.report();
}

// The broken metadata broadcasts the batch's first row to every row (torch's copy_ of a 1-row
// source): each sub-batch then holds its own first request's values instead.
TEST(Relations, BatchInvarianceFailsWhenTheFirstRowIsBroadcast) {
  Component broken = registry().get("attn_metadata");
  broken.reference = [real = broken.reference](const Case& c, const TensorMap& inputs, TensorMap& outputs) {
    real(c, inputs, outputs);
    HostTensor& raw = outputs.at("raw_out_loc");
    for (int64_t r = 1; r < raw.numel(); ++r) raw.set_bits(r, raw.bits(0));
  };
  const CaseResult r = run_relation(broken, parse_relation_case("batch_invariance:attn_metadata(bs=8,mode=0)"), nullptr);
  EXPECT_EQ(r.status, CaseStatus::fail);
  EXPECT_TRUE(failed_on_reference(r)) << r.report();
}

// The broken step starts from empty pools: one step equals itself, but a split run loses what its
// first part stored.
TEST(Relations, SplitFailsWhenAStepForgetsTheState) {
  Component broken = registry().get("memory_pool");
  broken.reference = [real = broken.reference](const Case& c, const TensorMap& inputs, TensorMap& outputs) {
    for (const char* pool : {"swa_pool", "c4_pool", "c128_pool", "indexer_pool"}) fill_poison(outputs.at(pool), Poison::a);
    real(c, inputs, outputs);
  };
  const RelationCase rc = parse_relation_case("split(at=5):memory_pool(tokens=12,per_request=12,invalid=0)");
  const CaseResult r = run_relation(broken, rc, nullptr);
  EXPECT_EQ(r.status, CaseStatus::fail);
  EXPECT_TRUE(failed_on_reference(r)) << r.report();
  EXPECT_TRUE(run_relation(registry().get("memory_pool"), rc, nullptr).passed());
}

TEST(Relations, ARelationThatComparesNothingIsAnError) {
  Component blind = registry().get("mtp_expand");
  blind.slice_batch = [real = blind.slice_batch](const Case& c, const TensorMap& inputs, int64_t begin, int64_t end) {
    BatchSlice slice = real(c, inputs, begin, end);
    slice.output_rows.clear();
    return slice;
  };
  const CaseResult r = run_relation(blind, parse_relation_case("batch_invariance:mtp_expand(bs=8)"), nullptr);
  EXPECT_EQ(r.status, CaseStatus::error);
  EXPECT_NE(r.message.find("compares nothing"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace dsv4h
