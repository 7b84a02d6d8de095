// Bisection of the tiny model's forward (issue 31): a fault injected into one layer's one op of a
// candidate forward is named exactly, by op, whichever op it is; an unperturbed candidate (the same
// requests in another call order) passes with every op's error 0; a candidate lacking an op is
// named at that op; the op fixtures of the components reproduce the model's ops (the compressor's
// bit for bit, from the ring the earlier calls left).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "harness/model/bisect.h"
#include "harness/model/op_budgets.h"
#include "harness/model/op_fixture.h"
#include "model/backend.h"
#include "model/fault_injection.h"
#include "model/trace.h"
#include "reference/compressor.h"
#include "reference/kv_cache_model1.h"
#include "reference/narrow_float.h"

namespace dsv4h {
namespace {

using model::RowMatrix;

model::ModelConfig tiny() { return model::load_config("model/configs/tiny.json"); }

// Two requests of 12 tokens, 9 prefilled: every op kind runs, C4 entries (3 of them) are selected
// from position 7 on, so a selection of two entries or more exists to perturb.
model::RunPlan plan(int64_t vocab) {
  model::RunPlan p;
  p.prompt = 9;
  for (int64_t r = 0; r < 2; ++r) {
    std::vector<int64_t> tokens;
    for (int64_t t = 0; t < 12; ++t) tokens.push_back((t * 37 + 11 + r * 101) % vocab);
    p.tokens.push_back(tokens);
  }
  return p;
}

struct Fixture {
  model::ModelConfig config = tiny();
  model::ReferenceModel model{config, model::make_weights(config, 3)};
  model::RunPlan runs = plan(config.vocab_size);
};

BisectResult bisect_with_fault(const Fixture& f, const std::string& op, double delta,
                               int64_t step = model::FaultInjection::kEveryStep) {
  model::Trace trace;
  model::TraceRecorder recorder(trace);
  model::FaultInjection fault(op, delta, &recorder, step);
  model::ReferenceBackend(f.model, model::CallOrder::step_major).run(f.runs, fault);
  EXPECT_GT(fault.hits(), 0) << op;
  return bisect(f.model, f.runs, trace);
}

TEST(ModelBisect, NamesExactlyTheInjectedOp) {
  const Fixture f;
  // Ops of every kind and place: embedding, mHC, norms, GEMMs, the cache, the compressors, the
  // indexer, attention of each ratio, routing (hash and biased), experts, the head and the MTP.
  for (const std::string op :
       {"embed", "layers.0.hc_attn.pre", "layers.0.attn.attend", "layers.0.ffn.route", "layers.1.attn.q_rope",
        "layers.1.attn.compress", "layers.1.attn.indexer.compress", "layers.1.attn.indexer.q", "layers.1.attn.index_select",
        "layers.2.attn.kv_cache", "layers.2.attn.attend", "layers.2.ffn.route", "layers.2.ffn.experts", "layers.3.attn.wo_a",
        "layers.3.hc_ffn.post", "head.proj", "mtp.0.h_proj", "mtp.0.input", "mtp.0.ffn.shared", "mtp.0.head.norm"}) {
    const BisectResult r = bisect_with_fault(f, op, 0.25);
    ASSERT_TRUE(r.first.has_value()) << op;
    EXPECT_EQ(r.ops[*r.first].op, op);
    EXPECT_TRUE(r.aborted.empty()) << op << ": " << r.aborted;
    // Teacher forcing keeps the fault from spreading: every other op is exactly the reference's.
    for (const OpError& e : r.ops) {
      if (e.op != op) {
        EXPECT_EQ(e.error, 0) << op << " made " << e.op << " diverge";
      }
    }
    ASSERT_TRUE(r.divergent.has_value());
    EXPECT_FALSE(r.divergent->inputs.empty()) << op;
    // Its drift from the free-running reference is the fault itself (where it carries on depends
    // on the op: a scaled indexer q or key selects the same entries).
    EXPECT_GT(r.ops[*r.first].drift, 0) << op;
  }
}

TEST(ModelBisect, TheTableMarksAnOpOverBudgetAsAMismatch) {
  // ci/check-mutant.py counts a failed test as a catch only where its message holds compare_output's
  // mark; the model's tests print this table when an op crosses its budget.
  const Fixture f;
  const std::vector<std::string> over = bisect_table(bisect_with_fault(f, "layers.2.ffn.experts", 0.25));
  EXPECT_EQ(over.back().rfind("MISMATCH: layers.2.ffn.experts (", 0), 0u) << over.back();
  for (const std::string& line : bisect_table(bisect_with_fault(f, "layers.1.attn_norm", 0x1.0p-9)))
    EXPECT_EQ(line.find("MISMATCH"), std::string::npos) << line;
}

TEST(ModelBisect, AFaultInOneDecodeStepIsNamedWithItsCall) {
  // Only step 2's calls perturbed (a decode step, as a replayed graph might go wrong): the op and
  // that step are named, the first request to run it in forward order (request 0).
  const Fixture f;
  for (const std::string op : {"layers.1.attn.attend", "layers.3.ffn.experts", "mtp.0.attn.kv_cache"}) {
    const BisectResult r = bisect_with_fault(f, op, 0.25, 2);
    ASSERT_TRUE(r.first.has_value()) << op;
    EXPECT_EQ(r.ops[*r.first].op, op);
    EXPECT_EQ(r.divergent->step, 2) << op;
    EXPECT_EQ(r.divergent->request, 0) << op;
  }
}

TEST(ModelBisect, AFaultWithinBudgetIsNotNamed) {
  // A relative change of 2^-9 in a bf16 output is inside its budget (2^-7): nothing is named, and
  // the op's error is that change (row relative L2 of a scaling).
  const Fixture f;
  const BisectResult r = bisect_with_fault(f, "layers.1.attn_norm", 0x1.0p-9);
  EXPECT_TRUE(r.passed());
  for (const OpError& e : r.ops) {
    if (e.op == "layers.1.attn_norm") {
      EXPECT_NEAR(e.error, 0x1.0p-9, 1e-15);
    }
  }
}

TEST(ModelBisect, AnotherCallOrderPassesWithEveryErrorZero) {
  const Fixture f;
  model::Trace trace;
  model::TraceRecorder recorder(trace);
  model::ReferenceBackend(f.model, model::CallOrder::step_major).run(f.runs, recorder);
  const BisectResult r = bisect(f.model, f.runs, trace);
  EXPECT_TRUE(r.passed());
  EXPECT_GT(r.ops.size(), 100u);
  for (const OpError& e : r.ops) {
    EXPECT_EQ(e.error, 0) << e.op;
    EXPECT_EQ(e.drift, 0) << e.op;
    // A prefill and 3 decode steps a request; the MTP block skips the last, which has no next token.
    EXPECT_EQ(e.calls, e.op.rfind("mtp.", 0) == 0 ? 2 * 3 : 2 * 4) << e.op;
  }
}

// Drops one op's records: the candidate a forward that never ran it.
class Dropping : public model::OpObserver {
 public:
  Dropping(std::string op, model::OpObserver& next) : op_(std::move(op)), next_(next) {}
  void begin_call(int64_t r, int64_t s) override { next_.begin_call(r, s); }
  void op(const std::string& name, const std::vector<model::OpInput>& in, const std::vector<model::OpOutput>& out) override {
    if (name != op_) next_.op(name, in, out);
  }

 private:
  std::string op_;
  model::OpObserver& next_;
};

TEST(ModelBisect, AMissingOpIsNamed) {
  const Fixture f;
  model::Trace trace;
  model::TraceRecorder recorder(trace);
  Dropping dropping("layers.3.ffn.gate", recorder);
  model::ReferenceBackend(f.model).run(f.runs, dropping);
  const BisectResult r = bisect(f.model, f.runs, trace);
  ASSERT_TRUE(r.first.has_value());
  EXPECT_EQ(r.ops[*r.first].op, "layers.3.ffn.gate");
  EXPECT_NE(r.ops[*r.first].problem.find("lacks output logits"), std::string::npos) << r.ops[*r.first].problem;
}

TEST(ModelBisect, ObservingChangesNothing) {
  const Fixture f;
  model::RequestState a = f.model.new_request(), b = f.model.new_request();
  model::Trace trace;
  model::TraceRecorder recorder(trace);
  const std::vector<int64_t>& tokens = f.runs.tokens[0];
  EXPECT_EQ(f.model.forward(a, tokens).logits, f.model.forward(b, tokens, false, &recorder).logits);
}

TEST(ModelBisect, OpNamesSplitIntoLayerAndKind) {
  EXPECT_EQ(op_kind("layers.12.attn.attend"), "attn.attend");
  EXPECT_EQ(op_layer("layers.12.attn.attend"), "layers.12");
  EXPECT_EQ(op_kind("mtp.0.head.proj"), "head.proj");
  EXPECT_EQ(op_layer("mtp.0.head.proj"), "mtp.0");
  EXPECT_EQ(op_kind("head.norm"), "head.norm");
  EXPECT_EQ(op_layer("embed"), "");
  EXPECT_THROW(op_budget("layers.1.attn.nonsense", tiny()), std::logic_error);
}

// Keeps the inputs and outputs of every op of request 0's calls (its prefill and decode steps).
class Capture : public model::OpObserver {
 public:
  void begin_call(int64_t r, int64_t) override { keep_ = r == 0; }
  void op(const std::string& name, const std::vector<model::OpInput>& in, const std::vector<model::OpOutput>& out) override {
    if (!keep_) return;
    NamedRows inputs, outputs;
    for (const auto& i : in) inputs.emplace_back(i.name, *i.value);
    for (const auto& o : out) outputs.emplace_back(o.name, *o.value);
    ops.emplace_back(name, std::make_pair(inputs, outputs));
  }
  std::vector<std::pair<std::string, std::pair<NamedRows, NamedRows>>> ops;

 private:
  bool keep_ = false;
};

const RowMatrix& named(const NamedRows& rows, const std::string& name) {
  for (const auto& [n, v] : rows)
    if (n == name) return v;
  throw std::logic_error("no " + name);
}

double worst_row_rel(const HostTensor& got, const RowMatrix& expected) {
  double worst = 0;
  for (int64_t r = 0; r < expected.rows(); ++r) {
    double diff = 0, norm = 0;
    for (int64_t k = 0; k < expected.cols(); ++k) {
      const double e = expected(r, k), g = got.get(r * expected.cols() + k);
      diff += (g - e) * (g - e), norm += e * e;
    }
    worst = std::max(worst, std::sqrt(diff / norm));
  }
  return worst;
}

// The attend's fixture: the component's out rows (token, head) of the model's real heads against
// the op's output, within the rounding of q to bf16 (2^-8 relative, through softmax weights of
// scores of order one, and the output's own 2^-8): 2^-5.
void expect_attend_reproduced(const std::string& op, const OpFixture& fixture, const RowMatrix& o, int64_t heads) {
  const HostTensor& out = fixture.expected.at("out");
  const int64_t padded = fixture.test_case.integer("heads");
  for (int64_t t = 0; t < o.rows(); ++t)
    for (int64_t h = 0; h < heads; ++h) {
      double diff = 0, norm = 0;
      for (int64_t k = 0; k < 512; ++k) {
        const double e = o(t, h * 512 + k), g = out.get((t * padded + h) * 512 + k);
        diff += (g - e) * (g - e), norm += e * e;
      }
      ASSERT_LT(std::sqrt(diff / norm), 0x1.0p-5) << op << " token " << t << " head " << h;
    }
}

TEST(ModelBisect, AttendFixturesOfEveryRatioReproduceTheModel) {
  // 132 tokens, 129 prefilled: C128's first entry, the window sliding, the indexer truncating (16).
  model::ModelConfig config = tiny();
  config.index_topk = 16;
  const model::ReferenceModel m(config, model::make_weights(config, 5));
  model::RunPlan runs;
  runs.prompt = 129;
  runs.tokens.push_back({});
  for (int64_t t = 0; t < 132; ++t) runs.tokens[0].push_back((t * 53 + 7) % config.vocab_size);
  Capture capture;
  model::ReferenceBackend(m).run(runs, capture);
  int attends = 0;
  for (const auto& [op, io] : capture.ops) {
    if (op_kind(op) != "attn.attend" || op_layer(op) == "mtp.0") continue;
    const auto fixture = op_fixture(op, io.first, config, m.weights());
    ASSERT_TRUE(fixture.has_value()) << op;
    expect_attend_reproduced(op, *fixture, named(io.second, "o"), config.n_heads);
    ++attends;
  }
  EXPECT_EQ(attends, 4 * 4);  // 4 layers, a prefill and 3 decode steps
}

TEST(ModelBisect, OpFixturesReproduceTheModelsOps) {
  // Every op of a component, its fixture made from the op's own inputs: the component's reference
  // gives the model's output, up to the rounding of the inputs to the component's dtypes (bf16
  // activations, 2^-8 relative each) carried through the op, and of its output (bf16: 2^-8): 2^-5
  // leaves a condition number of 4 for that. Ids are exact.
  const Fixture f;
  Capture capture;
  model::ReferenceBackend(f.model).run(f.runs, capture);
  const std::map<std::string, std::vector<std::pair<std::string, std::string>>> outputs = {
      {"rms_norm", {{"y", "y"}}},
      {"mhc", {{"x", "x"}, {"post", "post"}, {"comb", "comb"}, {"h", "h"}}},
      {"moe_routing", {{"weights", "topk_weights"}}},
      {"moe", {{"y", "out"}}},
      {"compressor", {}},        // its packed pool, below
      {"sparse_attention", {}},  // per head, below
  };
  int fixtures = 0, compressor_entries = 0;
  std::map<std::string, int> compared;  // outputs compared per component: a renamed output must not empty it
  for (const auto& [op, io] : capture.ops) {
    const auto fixture = op_fixture(op, io.first, f.config, f.model.weights());
    const std::string component = op_budget(op, f.config).component;
    ASSERT_EQ(fixture.has_value(), !component.empty()) << op;
    if (!fixture) continue;
    ++fixtures;
    EXPECT_EQ(fixture->test_case.component(), component);
    for (const auto& [ours, theirs] : outputs.at(component)) {
      if (fixture->expected.count(theirs) == 0) continue;
      EXPECT_LT(worst_row_rel(fixture->expected.at(theirs), named(io.second, ours)), 0x1.0p-5) << op << " " << ours;
      ++compared[component];
    }
    if (op_kind(op) == "attn.compress") {  // the pool's entries unpacked are the model's, bit for bit
      const RowMatrix& entries = named(io.second, "entries");
      const reference::CompressorConfig config{static_cast<int>(fixture->test_case.integer("ratio")), 512};
      const int64_t per_page = reference::compressor_page_entries(config);
      const uint8_t* pool = fixture->expected.at("pool").bytes();
      for (int64_t e = 0; e < entries.rows(); ++e) {  // entry e went to slot e + 1
        uint16_t bits[512];
        reference::model1_unpack_token(pool + (e + 1) / per_page * reference::compressor_page_bytes(config), per_page,
                                       (e + 1) % per_page, bits);
        for (int k = 0; k < 512; ++k) ASSERT_EQ(reference::bf16_to_float(bits[k]), entries(e, k)) << op << " entry " << e;
      }
      compressor_entries += entries.rows();
    }
    if (component == "sparse_attention") expect_attend_reproduced(op, *fixture, named(io.second, "o"), f.config.n_heads);
    if (component == "moe_routing") {
      const RowMatrix& ids = named(io.second, "ids");
      for (int64_t i = 0; i < ids.size(); ++i)
        EXPECT_EQ(fixture->expected.at("topk_ids").data<int32_t>()[i], static_cast<int32_t>(ids.data()[i])) << op;
    }
  }
  EXPECT_GT(fixtures, 100);
  EXPECT_GT(compressor_entries, 3);  // C4 entries of the prefill and of decode steps
  for (const auto& [component, io] : outputs)
    if (!io.empty()) {
      EXPECT_GT(compared[component], 0) << component << ": no output of its fixtures compared";
    }
}

}  // namespace
}  // namespace dsv4h
