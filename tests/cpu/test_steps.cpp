// Composed steps on the CPU (harness/step.h): the MTP draft step's reference is its stages'
// references run by hand in order, the second on the first's buffers; its padding is its first
// stage's; a batch relation of the step sees a broken stage, and refuses a stage that slices to
// another case than the sub-step runs; a stage wired to a tensor nobody provides is refused by name.
#include <gtest/gtest.h>

#include "harness/component.h"
#include "harness/poison.h"
#include "harness/relation.h"
#include "harness/step.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

// The step's tensors "<prefix>.X" as X.
TensorMap unprefixed(const TensorMap& tensors, const std::string& prefix) {
  TensorMap out;
  for (const auto& [name, t] : tensors)
    if (name.rfind(prefix + ".", 0) == 0) out.emplace(name.substr(prefix.size() + 1), t);
  return out;
}

void expect_bitwise_equal(const TensorMap& want, const TensorMap& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (const auto& [name, w] : want) {
    const HostTensor& g = got.at(name);
    ASSERT_EQ(w.shape(), g.shape()) << what << " " << name;
    for (int64_t i = 0; i < w.numel(); ++i) ASSERT_EQ(w.bits(i), g.bits(i)) << what << " " << name << w.index_string(i);
  }
}

TEST(MtpDraftStepReference, IsItsStagesRunInOrder) {
  const Component& step = registry().get("mtp_draft_step");
  const Component& meta = registry().get("attn_metadata");
  const Component& expand = registry().get("mtp_expand");
  for (const char* text : {"mtp_draft_step(bs=8,real=5,topk=3,seed=4)",
                           "mtp_draft_step(bs=6,real=2,topk=2,ctx=2048,max_seq_len=700,temp=1,seed=5)"}) {
    SCOPED_TRACE(text);
    const Case c = parse_case(text);
    const TensorMap inputs = step.make_inputs(c);
    const TensorMap outputs = reference_outputs(step, c, inputs, Poison::a);

    const Case meta_case = parse_case(std::string("attn_metadata(bs=") + std::to_string(c.integer("bs")) +
                                      ",real=" + std::to_string(c.integer("real")) + ",mode=0,ctx=" +
                                      std::to_string(c.integer("ctx")) + ",max_seq_len=" +
                                      std::to_string(c.integer("max_seq_len")) + ",temp=" + std::to_string(c.integer("temp")) +
                                      ")", c.seed());
    expect_bitwise_equal(meta.make_inputs(meta_case), unprefixed(inputs, "meta"), "step inputs");
    const TensorMap meta_out = reference_outputs(meta, meta_case, unprefixed(inputs, "meta"), Poison::a);
    expect_bitwise_equal(meta_out, unprefixed(outputs, "meta"), "meta stage");

    const Case expand_case = parse_case("mtp_expand(bs=" + std::to_string(c.integer("bs")) + ",topk=" +
                                        std::to_string(c.integer("topk")) + ",ctx=" + std::to_string(c.integer("ctx")) +
                                        ",fields=1)", c.seed());
    TensorMap expand_in;
    for (const char* field : {"raw_out_loc", "seq_lens_casual", "positions_casual", "swa_page_indices", "swa_topk_lengths"})
      expand_in.emplace(field, meta_out.at(field));
    expect_bitwise_equal(reference_outputs(expand, expand_case, expand_in, Poison::a), unprefixed(outputs, "expand"), "expand stage");
  }
}

TEST(MtpDraftStepReference, RunsAsAComponentAndPadsWithItsFirstStage) {
  const Component& step = registry().get("mtp_draft_step");
  const CaseRun run = run_case(step, parse_case("mtp_draft_step(bs=4,real=3,topk=2,seed=2)"), nullptr);
  EXPECT_TRUE(run.result.passed()) << run.result.report();
  EXPECT_GT(run.result.work.bytes_moved, 0);

  const Case c = parse_case("mtp_draft_step(bs=3,topk=2,seed=3)");
  const TensorMap inputs = step.make_inputs(c);
  const Component& meta = registry().get("attn_metadata");
  const Case meta_case = parse_case("attn_metadata(bs=3,mode=0,temp=0)", 3);
  expect_bitwise_equal(meta.pad_batch(meta_case, unprefixed(inputs, "meta"), 8),
                       unprefixed(step.pad_batch(c, inputs, 8), "meta"), "padded inputs");
}

// The draft step composed again by hand, with `expand` as its second stage.
Component draft_step_with(const Component& expand, std::vector<std::string> slice_defaults) {
  const auto arg = [](const Case& c, const char* name) { return std::string(name) + "=" + std::to_string(c.integer(name)); };
  std::vector<StepStage> stages = {
      {"meta", registry().get("attn_metadata"),
       [=](const Case& c) {
         return parse_case("attn_metadata(" + arg(c, "bs") + "," + arg(c, "real") + ",mode=0," + arg(c, "ctx") + "," +
                           arg(c, "max_seq_len") + "," + arg(c, "temp") + ")", c.seed());
       },
       {}},
      {"expand", expand,
       [=](const Case& c) { return parse_case("mtp_expand(" + arg(c, "bs") + "," + arg(c, "topk") + "," + arg(c, "ctx") + ",fields=1)", c.seed()); },
       {}},
  };
  for (const char* field : {"raw_out_loc", "seq_lens_casual", "positions_casual", "swa_page_indices", "swa_topk_lengths"})
    stages[1].inputs.emplace(field, std::string("meta.") + field);
  return compose_stages(registry().get("mtp_draft_step"), std::move(stages), std::move(slice_defaults));
}

TEST(ComposedStep, ABatchRelationOfTheStepSeesABrokenStage) {
  const RelationCase rc = parse_relation_case("batch_invariance(chunks=3):mtp_draft_step(bs=12,real=9,topk=2)");
  EXPECT_TRUE(run_relation(draft_step_with(registry().get("mtp_expand"), {"real"}), rc, nullptr).passed());
  // Every draft row of the broken expansion is the batch's first request's.
  Component broken = registry().get("mtp_expand");
  broken.reference = [real = broken.reference](const Case& c, const TensorMap& inputs, TensorMap& outputs) {
    real(c, inputs, outputs);
    for (auto& [name, t] : outputs) {
      const int64_t cols = t.shape()[1];
      for (int64_t i = cols; i < t.numel(); ++i) t.set_bits(i, t.bits(i % cols));
    }
  };
  const CaseResult r = run_relation(draft_step_with(broken, {"real"}), rc, nullptr);
  EXPECT_EQ(r.status, CaseStatus::fail);
  bool expand_failed = false;
  for (const auto& [label, cmp] : r.checks) expand_failed = expand_failed || (!cmp.passed() && cmp.output.rfind("expand.", 0) == 0);
  EXPECT_TRUE(expand_failed) << r.report();
}

// Without `real` at its default a sub-batch of 4 would keep real=9: the stage's own slice (9 real
// requests are data) and the sub-step disagree, and the relation says so instead of checking.
TEST(ComposedStep, AStageSlicingToAnotherCaseIsAnError) {
  const RelationCase rc = parse_relation_case("batch_invariance(chunks=3):mtp_draft_step(bs=12,real=9,topk=2)");
  const CaseResult r = run_relation(draft_step_with(registry().get("mtp_expand"), {}), rc, nullptr);
  EXPECT_EQ(r.status, CaseStatus::error);
  EXPECT_NE(r.message.find("slices to attn_metadata("), std::string::npos) << r.message;
}

TEST(ComposedStep, AStageInputNobodyProvidesIsRefusedByName) {
  const Component& expand = registry().get("mtp_expand");
  Component shell;
  shell.name = "broken_step";
  shell.batch_param = "bs";
  Component step = compose_stages(
      shell, {{"expand", expand, [&](const Case&) { return parse_case("mtp_expand(bs=2,topk=2,fields=1)"); },
               {{"raw_out_loc", "meta.raw_out_loc"}}}});
  const Case c = parse_case("mtp_expand(bs=2)");
  try {
    step.validate_inputs(c, step.make_inputs(c));
    FAIL() << "a stage input from a missing stage was accepted";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("\"meta.raw_out_loc\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dsv4h
