#include "model_bisect.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "../json_file.h"
#include "../model/bisect.h"
#include "../model/op_budgets.h"
#include "../model/op_fixture.h"
#include "model/fault_injection.h"
#include "model/trace.h"

namespace dsv4h::cli {
namespace {

// The injected fault's size: far above every float budget (the largest, fp8_quantised's, 2^-3).
constexpr double kDefaultDelta = 0.25;

double delta_of(const Args& args) {
  if (!args.has("--inject-delta")) return kDefaultDelta;
  const std::string text = args.get("--inject-delta");
  size_t used = 0;
  double d = 0;
  try {
    d = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !std::isfinite(d) || d == 0)
    throw UsageError("--inject-delta must be a finite non-zero number, got \"" + text + "\"");
  return d;
}

void write_fixture(const Args& args, const BisectResult& result, const model::ReferenceModel& m,
                   const std::string& case_text) {
  const OpError& e = result.ops[*result.first];
  const auto fixture = op_fixture(e.op, result.divergent->inputs, m.config(), m.weights());
  if (!fixture) {
    std::printf("no fixture: %s maps to no component (%s)\n", e.op.c_str(), op_budget(e.op, m.config()).note.c_str());
    return;
  }
  char note[512];
  std::snprintf(note, sizeof(note),
                "op %s of %s (request %lld, step %lld), the first over its budget: local error %.3g of output %s, "
                "budget %.3g; inputs the candidate's, outputs.expected the component's reference on them",
                e.op.c_str(), case_text.c_str(), static_cast<long long>(result.divergent->request),
                static_cast<long long>(result.divergent->step), e.error, e.output.c_str(), e.budget);
  write_op_fixture(args.get("--fixture"), *fixture, note);
  std::printf("wrote %s: %s (dsv4h run --case %s)\n", args.get("--fixture").c_str(), fixture->test_case.str().c_str(),
              args.get("--fixture").c_str());
}

// --inject OP or OP@STEP: the op, and the one step whose calls it perturbs (or every step).
std::pair<std::string, int64_t> injected(const std::string& text) {
  const size_t at = text.find('@');
  if (at == std::string::npos) return {text, model::FaultInjection::kEveryStep};
  const std::string step = text.substr(at + 1);
  if (step.empty() || step.size() > 6 || step.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError("--inject OP@STEP: STEP must be a step number (0 the prefill), got \"" + step + "\"");
  return {text.substr(0, at), std::stoll(step)};
}

}  // namespace

int run_model_bisection(const Args& args, const std::string& case_text, const model::ReferenceModel& m,
                        const model::RunPlan& plan, const model::ModelBackend* gpu) {
  for (const char* option : {"--json", "--fixture"})
    if (args.has(option)) check_writable(option, args.get(option));
  const bool inject = args.has("--inject");
  const auto [op, step] = inject ? injected(args.get("--inject")) : std::make_pair(std::string(), model::FaultInjection::kEveryStep);
  model::Trace candidate;
  model::TraceRecorder recorder(candidate);
  model::FaultInjection fault(op, delta_of(args), &recorder, step);
  model::OpObserver& observer = inject ? static_cast<model::OpObserver&>(fault) : recorder;
  if (gpu)
    gpu->run(plan, observer);
  else
    model::ReferenceBackend(m, model::CallOrder::step_major).run(plan, observer);
  if (inject && fault.hits() == 0) {
    std::string ops;
    for (const std::string& name : candidate.ops()) ops += (ops.empty() ? "" : ", ") + name;
    if (step != model::FaultInjection::kEveryStep && std::find(candidate.ops().begin(), candidate.ops().end(), op) != candidate.ops().end())
      throw UsageError("--inject: op \"" + op + "\" has no step " + std::to_string(step) + " in " + case_text);
    throw UsageError("--inject: no op named \"" + op + "\" ran in " + case_text + "; the ops: " + ops);
  }
  const BisectResult result = bisect(m, plan, candidate);
  const std::string who = gpu ? "the GPU forward (" + gpu->name() + ")" : "the reference step-major";
  std::printf("bisection  %s, candidate: %s%s\n", case_text.c_str(), who.c_str(),
              inject ? (" with " + args.get("--inject") + "'s outputs perturbed").c_str() : "");
  for (const std::string& line : bisect_table(result)) std::printf("%s\n", line.c_str());
  if (result.first)
    std::printf("first divergent op: %s (output %s, request %lld, step %lld)\n", result.ops[*result.first].op.c_str(),
                result.ops[*result.first].output.c_str(), static_cast<long long>(result.divergent->request),
                static_cast<long long>(result.divergent->step));
  else if (result.passed())
    std::printf("every op within its budget\n");
  if (!result.aborted.empty()) std::printf("the teacher-forced run stopped: %s\n", result.aborted.c_str());
  if (args.has("--json")) {
    nlohmann::json doc = {{"component", "model"}, {"case", case_text}, {"backend", gpu ? "gpu" : "reference"},
                          {"bisection", bisect_json(result)}};
    if (inject) doc["inject"] = args.get("--inject");
    write_json_file(args.get("--json"), doc);
  }
  if (args.has("--fixture") && result.first) write_fixture(args, result, m, case_text);
  return result.passed() ? kPass : kMismatch;
}

}  // namespace dsv4h::cli
