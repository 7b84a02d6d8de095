#include "relation.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "errors.h"
#include "excerpt.h"
#include "poison.h"
#include "random.h"

namespace dsv4h {
namespace {

// Rows [begin, end) of the batch, run as one piece.
struct Piece {
  int64_t begin, end;
};

// One way of doing the batch's work as pieces: each on fresh outputs, or (carry_state) each
// starting from the state the previous piece left.
struct Side {
  std::string label;
  std::vector<Piece> pieces;
  bool carry_state;
};

std::string range(int64_t begin, int64_t end) { return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")"; }

std::vector<Side> batch_invariance_sides(const Case& params, const Case& subject, int64_t n) {
  const int64_t chunks = params.integer("chunks");
  if (chunks < 2) throw BadInput("batch_invariance: chunks must be >= 2");
  if (n < 2) throw BadInput("batch_invariance: needs a batch of at least 2 rows, " + subject.str() + " has " + std::to_string(n));
  Rng rng(subject.seed() ^ 0xba7c41e5ULL);
  const int64_t alone = rng.integer(0, n - 1);
  std::vector<int64_t> cuts;  // k - 1 distinct cut points in [1, n - 1]
  const int64_t k = std::min(chunks, n);
  while (static_cast<int64_t>(cuts.size()) < k - 1) {
    const int64_t cut = rng.integer(1, n - 1);
    if (std::find(cuts.begin(), cuts.end(), cut) == cuts.end()) cuts.push_back(cut);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.insert(cuts.begin(), 0);
  cuts.push_back(n);
  Side split{std::to_string(k) + " chunks", {}, false};
  for (size_t i = 0; i + 1 < cuts.size(); ++i) split.pieces.push_back({cuts[i], cuts[i + 1]});
  return {{"row " + std::to_string(alone) + " alone", {{alone, alone + 1}}, false}, split};
}

std::vector<Side> split_sides(const Case& params, const Case& subject, int64_t n) {
  const int64_t at = params.integer("at"), every = params.integer("every");
  if ((at > 0) == (every > 0) || at < -1 || every < 0)
    throw BadInput("split: give either at (in (0, rows)) or every (>= 1), got at=" + std::to_string(at) +
                   ", every=" + std::to_string(every));
  if (at > 0) {
    if (at >= n) throw BadInput("split: at=" + std::to_string(at) + " must be inside the batch of " + std::to_string(n) + " rows of " + subject.str());
    return {{"split at " + std::to_string(at), {{0, at}, {at, n}}, true}};
  }
  Side side{"steps of " + std::to_string(every), {}, true};
  for (int64_t b = 0; b < n; b += every) side.pieces.push_back({b, std::min(n, b + every)});
  return {side};
}

struct RelationKind {
  std::string name;
  std::vector<ParamSpec> params;
  std::function<std::vector<Side>(const Case& params, const Case& subject, int64_t n)> sides;
};

const std::vector<RelationKind>& relation_kinds() {
  static const std::vector<RelationKind> kinds = {
      {"batch_invariance", {{"chunks", ParamKind::integer, "3", "contiguous chunks of the random split (>= 2)"}},
       batch_invariance_sides},
      {"split",
       {{"at", ParamKind::integer, "-1", "split into [0, at) and [at, rows); -1: use every"},
        {"every", ParamKind::integer, "0", "steps of this many rows (1 = token by token); 0: use at"}},
       split_sides},
  };
  return kinds;
}

const RelationKind& kind_of(const std::string& name) {
  for (const RelationKind& k : relation_kinds())
    if (k.name == name) return k;
  std::string names;
  for (const RelationKind& k : relation_kinds()) names += (names.empty() ? "" : ", ") + k.name;
  throw BadInput("unknown relation \"" + excerpt(name, 60) + "\" (known: " + names + ")");
}

// The position of the ':' that separates the relation from its component case, or npos.
size_t relation_colon(const std::string& text) {
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '(') ++depth;
    if (text[i] == ')') --depth;
    if (text[i] == ':' && depth == 0) return i;
  }
  return std::string::npos;
}

// One backend's run of a case: outputs poisoned (a), the state outputs replaced by `state` where
// given, then the component's reference or GPU launch over them.
using Runner = std::function<TensorMap(const Case&, const TensorMap& inputs, const TensorMap* state)>;

TensorMap prepared_outputs(const Component& component, const Case& c, const TensorMap& inputs, const TensorMap* state) {
  TensorMap outputs = checked_outputs(component, c, inputs);
  fill_poison(outputs, Poison::a);
  if (state)
    for (const std::string& name : component.state_outputs) {
      if (outputs.at(name).shape() != state->at(name).shape())
        throw std::logic_error(component.name + ": state output \"" + name + "\" changes shape between pieces of a batch");
      outputs.at(name) = state->at(name);
    }
  return outputs;
}

TensorMap masked(const Component& component, const Case& c, TensorMap outputs) {
  mask_unchecked(component, c, outputs, Poison::a);
  return outputs;
}

void add_check(CaseResult& r, const std::string& label, const std::string& name, const HostTensor& expected,
               const HostTensor& got) {
  r.checks.emplace_back(label, compare_output(name, expected, Poison::a, got, Poison::a, OutputCheck{}));
  if (!r.checks.back().second.passed()) r.status = CaseStatus::fail;
}

// The whole batch once, then every side's pieces, compared with it on one backend.
void check_on(const Component& component, const Case& subject, const TensorMap& inputs, const std::vector<Side>& sides,
              const std::string& backend, const Runner& run, CaseResult& r) {
  const TensorMap whole = masked(component, subject, run(subject, inputs, nullptr));
  for (const Side& side : sides) {
    std::optional<TensorMap> state;
    for (const Piece& piece : side.pieces) {
      const BatchSlice slice = component.slice_batch(subject, inputs, piece.begin, piece.end);
      TensorMap got = run(slice.c, slice.inputs, side.carry_state && state ? &*state : nullptr);
      const TensorMap got_masked = masked(component, slice.c, got);
      for (const auto& [name, first_row] : slice.output_rows) {
        const HostTensor& part = got_masked.at(name);
        const int64_t rows = part.shape().empty() ? 0 : part.shape()[0];
        add_check(r, backend + ": " + side.label + ", rows " + range(piece.begin, piece.end), name, 
                  whole.at(name).rows(first_row, first_row + rows), part);
      }
      if (side.carry_state) state = std::move(got);
    }
    if (side.carry_state && state) {
      const TensorMap final_state = masked(component, subject, *state);
      for (const std::string& name : component.state_outputs)
        add_check(r, backend + ": " + side.label + ", final state", name, whole.at(name), final_state.at(name));
    }
  }
}

}  // namespace

std::string RelationCase::str() const {
  std::string params;
  for (const ParamSpec& p : kind_of(relation.component()).params)
    params += (params.empty() ? "" : ",") + p.name + "=" + std::to_string(relation.integer(p.name));
  return relation.component() + "(" + params + "):" + subject.str();
}

bool is_relation_case(const std::string& text) { return relation_colon(text) != std::string::npos; }

RelationCase parse_relation_case(const std::string& text, uint64_t default_seed) {
  const size_t colon = relation_colon(text);
  if (colon == std::string::npos)
    throw BadInput("relation case \"" + excerpt(text) + "\": expected RELATION(key=value,...):COMPONENT_CASE");
  auto [name, values] = split_case_string(text.substr(0, colon));
  const RelationKind& kind = kind_of(name);
  return {Case(name, kind.params, values, 0), parse_case(text.substr(colon + 1), default_seed)};
}

CaseResult run_relation(const Component& component, const RelationCase& rc, GpuBackend* gpu) {
  CaseResult r;
  r.component = component.name;
  r.case_text = rc.str();
  r.source = "generated";
  r.backend = gpu ? "gpu" : "reference";
  r.device = gpu ? gpu->device_name() : "cpu";
  r.repro = "dsv4h run --case '" + rc.str() + "'";
  try {
    if (!component.slice_batch) throw BadInput(component.name + " declares no slice_batch: its rows are not independent");
    const Case& subject = rc.subject;
    const std::vector<Side> sides =
        kind_of(rc.relation.component()).sides(rc.relation, subject, subject.integer(component.batch_param));
    const TensorMap inputs = component.make_inputs(subject);
    r.work = component.work(subject, inputs);
    const Runner reference = [&](const Case& c, const TensorMap& in, const TensorMap* state) {
      TensorMap outputs = prepared_outputs(component, c, in, state);
      component.reference(c, in, outputs);
      return outputs;
    };
    check_on(component, subject, inputs, sides, "reference", reference, r);
    if (gpu) {
      const Runner on_gpu = [&](const Case& c, const TensorMap& in, const TensorMap* state) {
        return gpu->run_over(component, c, in, prepared_outputs(component, c, in, state));
      };
      check_on(component, subject, inputs, sides, "gpu", on_gpu, r);
    }
    // A relation that compares nothing cannot fail: a defect of the component's declaration.
    if (r.checks.empty())
      throw std::logic_error(rc.str() + " compares nothing: " + component.name + "'s slice_batch maps no output rows and it has no state outputs");
  } catch (const BadInput& e) {
    r.status = CaseStatus::bad_input;
    r.message = e.what();
  } catch (const std::invalid_argument& e) {
    r.status = CaseStatus::bad_input;
    r.message = e.what();
  } catch (const std::exception& e) {
    r.status = CaseStatus::error;
    r.message = e.what();
  }
  return r;
}

}  // namespace dsv4h
