#include <cstdio>
#include <filesystem>

#include "../case_file.h"
#include "../errors.h"
#include "../relation.h"
#include "../tensor_json.h"
#include "../verify.h"
#include "args.h"
#include "commands.h"

namespace dsv4h::cli {

namespace {

const char* kHelp = R"(usage: dsv4h run --case FILE|STRING [--inputs IN.json] [--dump OUT.json] [--backend cpu|gpu|auto]

Runs one case on the reference and, where a GPU is present (or --backend gpu), on the GPU, and
compares them (and, for a fixture with outputs.expected, both with the stored outputs).

  --case     a case string, e.g. 'filtered_silu_mul(rows=77,inter=2048,kept=0.5,seed=42)'
             (missing parameters take their defaults; see dsv4h list), or a case file (JSON),
             or a relation case, e.g. 'batch_invariance(chunks=3):filtered_silu_mul(rows=77,seed=3)'
             (the same work as sub-batches or successive steps, equal bit for bit; see README)
  --inputs   a JSON document whose "inputs" replace the generated inputs (the schema of --dump)
  --dump     write {"component", "case", "seed", "inputs", "outputs": {"reference", "gpu"}};
             tensors are {"dtype", "shape", "data"}, data flat and row-major, NaN and infinities
             as "nan", "inf", "-inf"; an element no one wrote shows as "nan"
  --backend  auto (default: the GPU when one is found), cpu (reference only) or gpu (required)
)";

TensorMap load_inputs(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  if (!j.is_object() || !j.contains("inputs")) throw BadInput(path + ": missing field \"inputs\"");
  return tensors_from_json(j["inputs"], path + ": inputs");
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
  std::printf("%s\n", result.report().c_str());
  for (const auto& [label, cmp] : result.checks)
    if (cmp.passed()) std::printf("  %s: %s\n", label.c_str(), cmp.summary().c_str());
  return exit_code(result.status);
}

}  // namespace

int cmd_run(const std::vector<std::string>& argv) {
  const Args args(argv, {"--case", "--inputs", "--dump", "--backend"}, {"--help"});
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    return kPass;
  }
  if (!args.has("--case")) throw UsageError("--case is required (see --help)");
  const std::string case_arg = args.get("--case");
  if (is_relation_case(case_arg)) return run_relation_case(args, case_arg);
  const bool is_file = case_arg.find('(') == std::string::npos &&
                       (std::filesystem::exists(case_arg) || (case_arg.size() > 5 && case_arg.substr(case_arg.size() - 5) == ".json"));
  std::optional<CaseFile> file;
  if (is_file) file = load_case_file(case_arg);
  const Case c = file ? file->test_case : parse_case(case_arg);
  std::optional<TensorMap> inputs = file ? file->inputs : std::nullopt;
  if (args.has("--inputs")) inputs = load_inputs(args.get("--inputs"));

  std::string note;
  std::unique_ptr<GpuBackend> gpu = choose_backend(args.get("--backend", "auto"), note);
  if (!note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
  const Component& component = registry().get(c.component());
  const CaseRun run = run_case(component, c, gpu.get(), inputs, file ? file->expected : std::nullopt,
                               file ? file->path : "generated");
  std::printf("%s\n", run.result.report().c_str());
  for (const auto& [label, cmp] : run.result.checks)
    if (cmp.passed()) std::printf("  %s: %s\n", label.c_str(), cmp.summary().c_str());
  if (args.has("--dump")) {
    write_json_file(args.get("--dump"), case_document(c, run.inputs, run.outputs));
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
