#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "../component.h"
#include "../descriptor.h"
#include "model/listing.h"
#include "args.h"
#include "commands.h"

namespace dsv4h::cli {

namespace {
const char* kHelp = R"(usage: dsv4h list [--json] [--help]

Prints every registered component: its parameters with their defaults, the cases and relation
cases verify runs, its mutants, and whether this build has its GPU kernel. --json prints the same
as one JSON document (schema_version 1; also each component's kernel sources, GPU test filter,
benchmark binary and benchmark goals), which the CI scripts read instead of tables of their own,
and under "models" the model's benchmark binary and goals (it is not a component).
)";

nlohmann::json component_json(const Component& c) {
  nlohmann::json params = nlohmann::json::array(), mutants = nlohmann::json::array();
  for (const ParamSpec& p : c.params)
    params.push_back({{"name", p.name}, {"kind", p.kind == ParamKind::integer ? "integer" : "real"},
                      {"default", p.default_value}, {"help", p.help}});
  for (const Mutant& m : c.mutants) mutants.push_back({{"name", m.name}, {"kernel_sources", m.kernel_sources}, {"bug", m.bug}, {"race", m.race}});
  return {{"name", c.name}, {"summary", c.summary}, {"gpu_kernel", static_cast<bool>(c.gpu)}, {"params", params},
          {"verify_cases", c.verify_cases}, {"batch_param", c.batch_param}, {"replay_case", c.replay_case},
          {"relation_cases", c.relation_cases}, {"mutants", mutants}, {"kernel_sources", c.kernel_sources},
          {"gpu_tests", c.gpu_tests},
          {"bench", {{"binary", c.bench_binary}, {"filter", c.bench_filter}}}, {"goals", c.goals}};
}

}  // namespace

std::vector<std::string> model_kernel_sources() {
  std::vector<std::string> sources = model::listing().own_sources;
  for (const Component& c : registry().all())
    for (const std::string& k : c.kernel_sources)
      if (std::find(sources.begin(), sources.end(), k) == sources.end()) sources.push_back(k);
  return sources;
}

int cmd_list(const std::vector<std::string>& argv) {
  const Args args(argv, {}, {"--help", "--json"});
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    return kPass;
  }
  if (args.has("--json")) {
    nlohmann::json components = nlohmann::json::array();
    for (const Component& c : registry().all()) components.push_back(component_json(c));
    const model::ModelListing& m = model::listing();
    const nlohmann::json models = nlohmann::json::array(
        {{{"name", m.name}, {"bench", {{"binary", m.bench_binary}, {"filter", m.bench_filter}}}, {"goals", parse_goals(m.name, m.goals)},
          {"gpu_tests", m.gpu_tests}, {"kernel_sources", model_kernel_sources()}}});
    const nlohmann::json doc = {{"schema_version", 1}, {"components", components}, {"models", models}};
    std::printf("%s\n", doc.dump(1).c_str());
    return kPass;
  }
  for (const Component& c : registry().all()) {
    std::printf("%s  [GPU kernel: %s]\n  %s\n  parameters:\n", c.name.c_str(), c.gpu ? "built" : "not in this build",
                c.summary.c_str());
    for (const ParamSpec& p : c.params)
      std::printf("    %-12s default %-6s %s\n", p.name.c_str(), p.default_value.c_str(), p.help.c_str());
    std::printf("  verify cases (each run for every seed):\n");
    for (const std::string& v : c.verify_cases) std::printf("    %s\n", v.c_str());
    if (!c.relation_cases.empty()) std::printf("  relation cases (each run for every seed):\n");
    for (const std::string& r : c.relation_cases) std::printf("    %s\n", r.c_str());
    std::printf("  mutants (the checks must catch each):\n");
    for (const Mutant& m : c.mutants) std::printf("    %-26s %s\n", m.name.c_str(), m.bug.c_str());
  }
  return kPass;
}

}  // namespace dsv4h::cli
