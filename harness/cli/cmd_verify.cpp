#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "../case_file.h"
#include "../errors.h"
#include "../excerpt.h"
#include "../relation.h"
#include "../verify.h"
#include "args.h"
#include "commands.h"

namespace dsv4h::cli {

namespace {

const char* kHelp = R"(usage: dsv4h verify [--component NAME] [--backend cpu|gpu|auto] [--seeds N] [--filter PAT]
                    [--max-batch N] [--no-replay] [--fixtures DIR] [--json OUT.json]

Verifies every registered component (or --component NAME):
  - golden fixtures (fixtures/NAME/*.json, outputs worked out independently of the reference):
    the reference, and the GPU where present, against the stored outputs;
  - the regression fixtures (fixtures/regressions/, shrunk counterexamples): on a GPU against the
    reference, without one the reference alone (against stored outputs where a file has them);
  - the component's relation cases (dsv4h list) for seeds 1..N: the same work as sub-batches or
    successive steps equals the whole run bit for bit, on the reference and, on a GPU, the GPU;
  - on a GPU: every verify case (dsv4h list) for seeds 1..N against the reference, each run twice
    under two poisons; graph capture at the bucket sizes and replay at every batch size 1..max-batch.
Without a GPU only the first three run, and verify says that the GPU checks were skipped.
--component model runs the tiny model's reference self-consistency checks instead: prefill against
token-by-token decode (logits, every layer, the MTP block) for its cases and seeds 1..N, and the
bisection of the same requests run step by step across the batch (every op within its budget; --json
holds each op's error, budget, share used and drift; dsv4h run --help: --inject shows a failing one).
With --backend gpu, the model's GPU forward runs the same cases instead and is bisected against the
reference: a case fails where an op crosses its budget, naming the first (--backend auto: reference).

  --seeds N      seeds per verify case (default 3)
  --filter PAT   only cases whose canonical string contains PAT, where * stands for any run of
                 characters and ? for any one; A|B: either (e.g. 'mtp_expand(*seed=2)|split(');
                 at most 1000 characters. Not a regular expression: "." and "(" are themselves
  --max-batch N  largest batch replayed (default 256)
  --json FILE    write every result (errors against budgets, timings) as JSON
)";

struct Plan {
  const Component* component;
  Case c;
  std::optional<TensorMap> inputs, expected;
  std::string source;
};

// --filter: alternatives separated by "|", each matching anywhere in a case's canonical string,
// where "*" stands for any run of characters and "?" for any one; everything else, parentheses
// included, is itself. Not a regular expression: std::regex took minutes on 1000-character patterns
// ("(.?){15000}z", "(.?)" 250 times), where this takes at most the pattern's length times the
// string's steps a case.
class CaseFilter {
 public:
  explicit CaseFilter(const std::string& pattern) {
    if (pattern.size() > 1000) throw UsageError("--filter: longer than 1000 characters");
    size_t begin = 0;
    for (size_t bar = pattern.find('|'); ; bar = pattern.find('|', begin)) {
      alternatives_.push_back("*" + pattern.substr(begin, bar == std::string::npos ? bar : bar - begin) + "*");
      if (bar == std::string::npos) break;
      begin = bar + 1;
    }
  }

  bool matches(const std::string& text) const {
    for (const std::string& a : alternatives_)
      if (glob_matches(a, text)) return true;
    return false;
  }

 private:
  // On a mismatch, the latest "*" takes one more character and matching resumes after it: each
  // star's restarts move forward through the text, so the steps are at most |glob| * |text|.
  static bool glob_matches(const std::string& glob, const std::string& text) {
    size_t g = 0, t = 0, star = std::string::npos, star_text = 0;
    while (t < text.size()) {
      if (g < glob.size() && (glob[g] == '?' || glob[g] == text[t])) {
        ++g, ++t;
      } else if (g < glob.size() && glob[g] == '*') {
        star = g++;
        star_text = t;
      } else if (star != std::string::npos) {
        g = star + 1;
        t = ++star_text;
      } else {
        return false;
      }
    }
    while (g < glob.size() && glob[g] == '*') ++g;
    return g == glob.size();
  }

  std::vector<std::string> alternatives_;
};

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

int cmd_verify(const std::vector<std::string>& argv) {
  const Args args(argv, {"--component", "--backend", "--seeds", "--filter", "--max-batch", "--fixtures", "--json"},
                  {"--help", "--no-replay"});
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    return kPass;
  }
  const long long seeds = args.integer("--seeds", 3, 1);
  const long long max_batch = args.integer("--max-batch", 256, 1);
  const std::string fixtures = args.get("--fixtures", fixtures_dir());
  if (args.has("--json")) check_writable("--json", args.get("--json"));
  if (!std::filesystem::is_directory(fixtures)) throw UsageError("fixtures directory \"" + fixtures + "\" not found");
  const CaseFilter filter(args.get("--filter", ""));
  if (args.get("--component", "") == "model")
    return verify_model(args, [&](const std::string& text) { return filter.matches(text); });
  std::vector<const Component*> components;
  if (args.has("--component")) components.push_back(&registry().get(args.get("--component")));
  else for (const Component& c : registry().all()) components.push_back(&c);

  std::string note;
  std::unique_ptr<GpuBackend> gpu = choose_backend(args.get("--backend", "auto"), note);

  std::vector<Plan> plans;
  for (const Component* component : components) {
    for (const std::string& path : json_files_in(fixtures + "/" + component->name)) {
      CaseFile f = load_case_file(path);
      if (f.test_case.component() != component->name)
        throw BadInput(path + ": a case of " + f.test_case.component() + " among the fixtures of " + component->name);
      plans.push_back({component, f.test_case, f.inputs, f.expected, path});
    }
    // On the CPU a regression runs the reference alone (against its stored outputs where it has
    // them): a counterexample that no longer parses, or names no registered component, fails here.
    for (const std::string& path : json_files_in(fixtures + "/regressions")) {
      CaseFile f = load_case_file(path);
      if (f.test_case.component() == component->name) plans.push_back({component, f.test_case, f.inputs, f.expected, path});
    }
    if (!gpu) continue;
    for (const std::string& text : component->verify_cases)
      for (long long s = 1; s <= seeds; ++s) plans.push_back({component, parse_case(text, s), {}, {}, "generated"});
  }
  plans.erase(std::remove_if(plans.begin(), plans.end(),
                             [&](const Plan& p) { return !filter.matches(p.c.str()); }),
              plans.end());
  std::vector<std::pair<const Component*, RelationCase>> relations;
  for (const Component* component : components)
    for (const std::string& text : component->relation_cases)
      for (long long s = 1; s <= seeds; ++s) {
        RelationCase rc = parse_relation_case(text, s);
        if (filter.matches(rc.str())) relations.emplace_back(component, std::move(rc));
      }

  // Nothing checked is not a pass.
  if (plans.empty() && relations.empty() && !(gpu && !args.has("--no-replay")))
    throw UsageError("nothing to verify: no case matches --filter \"" + excerpt(args.get("--filter"), 80) + "\" among " +
                     (gpu ? "the verify cases and " : "") + "the fixtures in " + fixtures);
  std::fprintf(stderr, "dsv4h verify: %zu cases and %zu relation cases on %s (fixtures: %s)\n", plans.size(),
               relations.size(), gpu ? gpu->device_name().c_str() : "the CPU reference", fixtures.c_str());
  if (!note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
  nlohmann::json results = nlohmann::json::array();
  int failed = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    const Plan& p = plans[i];
    const CaseRun run = run_case(*p.component, p.c, gpu.get(), p.inputs, p.expected, p.source);
    std::fprintf(stderr, "[%zu/%zu] %s\n", i + 1, plans.size(), run.result.report().c_str());
    failed += !run.result.passed();
    results.push_back(result_to_json(run.result));
  }
  for (size_t i = 0; i < relations.size(); ++i) {
    const CaseResult result = run_relation(*relations[i].first, relations[i].second, gpu.get());
    std::fprintf(stderr, "[relation %zu/%zu] %s\n", i + 1, relations.size(), result.report().c_str());
    failed += !result.passed();
    results.push_back(result_to_json(result));
  }

  nlohmann::json replays = nlohmann::json::array();
  if (gpu && !args.has("--no-replay")) {
    for (const Component* component : components) {
      if (component->batch_param.empty()) continue;
      const Case base = parse_case(component->replay_case);
      ReplayOptions options;
      options.max_batch = max_batch;
      options.buckets = default_buckets(max_batch);
      options.on_batch = [&](int64_t n) {
        if (n % 32 == 0 || n == max_batch) std::fprintf(stderr, "graph replay %s: batch %lld/%lld\n", component->name.c_str(), (long long)n, max_batch);
      };
      nlohmann::json j = {{"component", component->name}, {"case", base.str()}, {"max_batch", max_batch},
                          {"buckets", options.buckets}};
      try {
        const ReplayResult r = gpu->graph_replay(*component, base, options);
        j.update({{"status", r.batches_failed ? "fail" : "pass"}, {"batches_checked", r.batches_checked},
                  {"batches_failed", r.batches_failed}, {"budget_used", r.budget_used}, {"failures", r.failures}});
        failed += r.batches_failed > 0;
        std::fprintf(stderr, "graph replay %s: %lld batches, %lld failed, budget used %.3g\n", component->name.c_str(),
                     (long long)r.batches_checked, (long long)r.batches_failed, r.budget_used);
        for (const std::string& f : r.failures) std::fprintf(stderr, "  %s\n", f.c_str());
      } catch (const std::exception& e) {
        j.update({{"status", "error"}, {"message", e.what()}});
        ++failed;
        std::fprintf(stderr, "graph replay %s: error: %s\n", component->name.c_str(), e.what());
      }
      replays.push_back(j);
    }
  }

  const size_t total = plans.size() + relations.size() + replays.size();
  std::printf("dsv4h verify: %zu passed, %d failed (%s)\n", total - failed, failed,
              gpu ? gpu->device_name().c_str() : "CPU reference only");
  if (!gpu) std::printf("%s\n", note.empty() ? "GPU checks skipped: --backend cpu" : note.c_str());
  if (args.has("--json"))
    write_json_file(args.get("--json"), {{"schema_version", 1}, {"commit", build_commit()}, {"date", now_utc()},
                                         {"backend", gpu ? "gpu" : "cpu"}, {"device", gpu ? gpu->device_name() : "cpu"},
                                         {"gpu_skipped", gpu ? "" : note},
                                         {"passed", total - failed}, {"failed", failed},
                                         {"cases", results}, {"graph_replay", replays}});
  return failed ? kMismatch : kPass;
}

}  // namespace dsv4h::cli
