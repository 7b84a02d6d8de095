#include <cstdio>
#include <filesystem>

#include "../case_file.h"
#include "../errors.h"
#include "../excerpt.h"
#include "../relation.h"
#include "../tensor_json.h"
#include "../verify.h"
#include "args.h"
#include "commands.h"

namespace dsv4h::cli {

namespace {

const char* kHelp = R"(usage: dsv4h run --case FILE|STRING [--inputs IN.json] [--dump OUT.json] [--backend cpu|gpu|auto]
       dsv4h run --case 'model(...)' --inject OP[@STEP] [--inject-delta D] [--json OUT.json] [--fixture OUT.json]

Runs one case on the reference and, where a GPU is present (or --backend gpu), on the GPU, and
compares them (and, for a fixture with outputs.expected, both with the stored outputs).

  --case     a case string, e.g. 'filtered_silu_mul(rows=77,inter=2048,kept=0.5,seed=42)'
             (missing parameters take their defaults; see dsv4h list), or a case file (JSON: a
             value ending in .json or holding a '/', e.g. ./my_case), or a relation case, e.g.
             'batch_invariance(chunks=3):filtered_silu_mul(rows=77,seed=3)' (the same work as
             sub-batches or successive steps, equal bit for bit; see README), or a case of the
             tiny model's fp64 reference, 'model(prompt=9,decode=3,batch=1,index_topk=512,seed=1)'
             (--dump: its tokens, logits and every layer's hidden streams; --backend gpu: the
             model's GPU forward bisected against the reference, every op's error against its
             budget, exit 1 naming the first op over it; --json and --fixture as below)
  --inputs   a JSON document whose "inputs" replace the generated inputs (the schema of --dump);
             where it names a "case" or "seed" they must be the run's (the dump records them);
             where it names neither, the dump's note says where the inputs came from
  --dump     write {"component", "case", "seed", "inputs", "outputs": {"reference", "gpu"}};
             tensors are {"dtype", "shape", "data"}, data flat and row-major, NaN and infinities
             as "nan", "inf", "-inf"; an element no one wrote shows as "nan". A dump that could
             exceed 256 MiB is refused before the run (exit 2); a case refused as bad input
             writes none
  --backend  auto (default: the GPU when one is found), cpu (reference only) or gpu (required)

Bisection of the tiny model (a model case only):
  --inject   an op of the forward, e.g. layers.2.attn.attend, layers.0.ffn.route, mtp.0.head.proj
             (a wrong name lists them), or OP@STEP for its calls of one step (0 the prefill, then
             the decode steps): the candidate is the reference run step by step across the
             requests (with --backend gpu: the GPU forward, which goes on from the perturbed
             values) with that op's outputs perturbed, and bisection (the reference
             rerun on the candidate's values, op by op) prints every op's local error, its budget
             (harness/model/op_budgets.cpp), the share used and its drift from the free-running
             reference, and names the first op over budget (exit 1); it must be the injected one
  --inject-delta  real outputs scaled by 1 + D (default 0.25); ids and selections get a duplicate
  --json     write the per-op table: {"component": "model", "case", "inject", "bisection": {...}}
  --fixture  write the first divergent op's inputs as a fixture of its component (rms_norm, mhc,
             moe_routing, moe, compressor, sparse_attention), outputs.expected the component's reference on them; an
             op of no component says so and writes none
)";

// The largest dump written: JSON text of a GiB case takes minutes to write and more to read.
constexpr uint64_t kDumpLimitBytes = uint64_t{256} << 20;

// The inputs of an --inputs document made for case `c`: a document naming another case or seed
// (a dump of another run) would make the dump of this run record a case its inputs are not of.
TensorMap load_inputs(const std::string& path, const Case& c) {
  const nlohmann::json j = read_json_file(path);
  if (!j.is_object() || !j.contains("inputs")) throw BadInput(path + ": missing field \"inputs\"");
  if (j.contains("seed") && !(j["seed"].is_number_unsigned() && j["seed"].get<uint64_t>() == c.seed()))
    throw BadInput(path + ": field \"seed\" is " + describe_json(j["seed"]) + ", the run's seed is " +
                   std::to_string(c.seed()) + " (--inputs takes the inputs of the case run)");
  if (j.contains("case")) {
    if (!j["case"].is_string()) throw BadInput(path + ": field \"case\" must be a string");
    const Case named = [&] {
      try {
        return parse_case(j["case"].get<std::string>(), c.seed());
      } catch (const BadInput& e) {
        throw BadInput(path + ": field \"case\": " + e.what());
      }
    }();
    if (named.str() != c.str())
      throw BadInput(path + ": field \"case\" is " + named.str() + ", the run's case is " + c.str() +
                     " (--inputs takes the inputs of the case run)");
  }
  return tensors_from_json(j["inputs"], path + ": inputs");
}

// Refuses, before the run, a dump that could exceed kDumpLimitBytes.
void check_dump_size(const Component& component, const Case& c, const TensorMap& inputs, bool gpu) {
  const TensorMap outputs = component.make_outputs(c);
  std::map<std::string, TensorMap> outputs_by_backend = {{"reference", outputs}};
  if (gpu) outputs_by_backend["gpu"] = outputs;
  const uint64_t bound = case_document_bytes_bound(inputs, outputs_by_backend);
  if (bound > kDumpLimitBytes)
    throw UsageError("--dump: the dump of " + c.str() + " could take " + std::to_string(bound >> 20) +
                     " MiB, more than the " + std::to_string(kDumpLimitBytes >> 20) +
                     " MiB a dump may: run it without --dump, or dump a smaller case");
}

int exit_code(CaseStatus status) {
  switch (status) {
    case CaseStatus::pass: return kPass;
    case CaseStatus::bad_input: return kBadUsage;
    default: return kMismatch;
  }
}

int run_relation_case(const Args& args, const std::string& text) {
  if (args.has("--inputs") || args.has("--dump")) throw UsageError("--inputs and --dump take a component case, not a relation case");
  const RelationCase rc = parse_relation_case(text);
  std::string note;
  std::unique_ptr<GpuBackend> gpu = choose_backend(args.get("--backend", "auto"), note);
  if (!note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
  const CaseResult result = run_relation(registry().get(rc.subject.component()), rc, gpu.get());
  std::fprintf(result.status == CaseStatus::bad_input ? stderr : stdout, "%s\n", result.report().c_str());
  for (const auto& [label, cmp] : result.checks)
    if (cmp.passed()) std::printf("  %s: %s\n", label.c_str(), cmp.summary().c_str());
  return exit_code(result.status);
}

}  // namespace

int cmd_run(const std::vector<std::string>& argv) {
  const Args args(argv, {"--case", "--inputs", "--dump", "--backend", "--inject", "--inject-delta", "--fixture", "--json"},
                  {"--help"});
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    return kPass;
  }
  if (!args.has("--case")) throw UsageError("--case is required (see --help)");
  const std::string case_arg = args.get("--case");
  if (is_relation_case(case_arg)) return run_relation_case(args, case_arg);
  if (is_model_case(case_arg)) return run_model_case(args, case_arg);
  for (const char* option : {"--inject", "--inject-delta", "--fixture", "--json"})
    if (args.has(option)) throw UsageError(std::string(option) + " takes a model case (see --help)");
  if (args.has("--dump")) check_writable("--dump", args.get("--dump"));
  // A name of a file in the working folder would otherwise shadow a component of the same name.
  const bool is_file = case_arg.find('(') == std::string::npos &&
                       (case_arg.find('/') != std::string::npos ||
                        (case_arg.size() > 5 && case_arg.substr(case_arg.size() - 5) == ".json"));
  std::optional<CaseFile> file;
  if (is_file) file = load_case_file(case_arg);
  const Case c = file ? file->test_case : parse_case(case_arg);
  std::optional<TensorMap> inputs = file ? file->inputs : std::nullopt;
  std::string inputs_note;
  if (args.has("--inputs")) {
    inputs = load_inputs(args.get("--inputs"), c);
    inputs_note = "inputs from " + args.get("--inputs");
  }

  std::string note;
  std::unique_ptr<GpuBackend> gpu = choose_backend(args.get("--backend", "auto"), note);
  if (!note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
  const Component& component = registry().get(c.component());
  if (args.has("--dump")) {
    if (!inputs) inputs = component.make_inputs(c);
    check_dump_size(component, c, *inputs, gpu != nullptr);
  }
  const CaseRun run = run_case(component, c, gpu.get(), inputs, file ? file->expected : std::nullopt,
                               file ? file->path : "generated");
  // A case refused as bad input is a usage error: its message goes where errors go.
  std::FILE* report = run.result.status == CaseStatus::bad_input ? stderr : stdout;
  std::fprintf(report, "%s\n", run.result.report().c_str());
  for (const auto& [label, cmp] : run.result.checks)
    if (cmp.passed()) std::printf("  %s: %s\n", label.c_str(), cmp.summary().c_str());
  if (args.has("--dump") && run.result.status == CaseStatus::bad_input) {
    std::fprintf(stderr, "%s not written: the case was refused\n", args.get("--dump").c_str());
  } else if (args.has("--dump")) {
    write_case_file(args.get("--dump"), c, run.inputs, run.outputs, inputs_note);
    std::fprintf(stderr, "wrote %s\n", args.get("--dump").c_str());
  }
  return exit_code(run.result.status);
}

std::unique_ptr<GpuBackend> choose_backend(const std::string& backend, std::string& note) {
  if (backend == "cpu") return nullptr;
  if (backend != "gpu" && backend != "auto") throw UsageError("--backend must be cpu, gpu or auto, got \"" + backend + "\"");
  std::string why_not;
  std::unique_ptr<GpuBackend> gpu = open_gpu_backend(why_not);
  if (!gpu && backend == "gpu") throw UsageError("--backend gpu: " + why_not);
  if (!gpu) note = "GPU checks skipped: " + why_not;
  return gpu;
}

}  // namespace dsv4h::cli
