#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "../case_file.h"
#include "../fuzz.h"
#include "args.h"
#include "commands.h"

namespace dsv4h::cli {

namespace {

const char* kHelp = R"(usage: dsv4h fuzz [--component NAME] [--backend cpu|gpu|auto] [--time 10m | --cases N] [--seed S]
                  [--max-batch N] [--regressions DIR] [--json OUT.json]

Random cases of every registered component (or --component NAME): a verify case of its descriptor
with a boundary-weighted batch size (1, powers of two and their neighbours, half of the draws) and
a random seed, checked as dsv4h verify checks them: on the GPU against the reference under two
poisons, and batches up to 64 replayed from captured graphs at every size; on the CPU the
reference alone (a crash or an error there fails). The first failure of a component is shrunk to
the smallest batch that still fails and written to the regressions folder, whose cases every GPU
suite and dsv4h verify run: give it a name that says what it caught and commit it.

  --time T         budget per component: 90s, 10m, 1h or seconds (default 60s)
  --cases N        stop a component after N cases (with --time, whichever comes first)
  --seed S         the draws' seed (default 1): the same seed and cases draw the same cases
  --max-batch N    largest batch drawn (default 4096)
  --regressions D  where counterexamples go ($DSV4H_REGRESSION_DIR, else fixtures/regressions)
  --json FILE      every component's counts and failures

exit codes: 0 no failure, 1 a failure (its reproduction line printed), 2 bad usage
)";

double parse_seconds(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  const std::string unit = end ? end : "";
  const double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
  if (text.empty() || end == text.c_str() || scale < 0 || !(value > 0) || value * scale > 7 * 86400)
    throw UsageError("--time must be a positive duration such as 90s, 10m or 1h (at most a week), got \"" + text + "\"");
  return value * scale;
}

}  // namespace

int cmd_fuzz(const std::vector<std::string>& argv) {
  const Args args(argv, {"--component", "--backend", "--time", "--cases", "--seed", "--max-batch", "--regressions", "--json"},
                  {"--help"});
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    return kPass;
  }
  if (args.has("--json")) check_writable("--json", args.get("--json"));
  FuzzOptions options;
  options.seconds = parse_seconds(args.get("--time", "60s"));
  options.max_cases = args.integer("--cases", 0, 1);
  options.seed = static_cast<uint64_t>(args.integer("--seed", 1, 0));
  options.max_batch = args.integer("--max-batch", 4096, 1);
  const char* env_dir = std::getenv("DSV4H_REGRESSION_DIR");
  options.regression_dir = args.get("--regressions", env_dir ? env_dir : fixtures_dir() + "/regressions");
  if (!std::filesystem::is_directory(options.regression_dir))
    throw UsageError("regressions folder \"" + options.regression_dir + "\" not found");
  options.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  std::vector<const Component*> components;
  if (args.has("--component")) components.push_back(&registry().get(args.get("--component")));
  else for (const Component& c : registry().all()) components.push_back(&c);

  std::string note;
  std::unique_ptr<GpuBackend> gpu = choose_backend(args.get("--backend", "auto"), note);
  if (!note.empty()) std::fprintf(stderr, "%s; the CPU reference alone runs\n", note.c_str());
  nlohmann::json results = nlohmann::json::array();
  int failed = 0;
  for (const Component* component : components) {
    const FuzzResult r = fuzz_component(*component, gpu.get(), options);
    std::printf("fuzz %s: %lld cases (%lld replayed from graphs), %lld drawn but refused, %.1f s: %s\n",
                r.component.c_str(), static_cast<long long>(r.cases), static_cast<long long>(r.replays),
                static_cast<long long>(r.refused), r.seconds, r.failures.empty() ? "no failure" : "FAILED");
    nlohmann::json failures = nlohmann::json::array();
    for (const FuzzFailure& f : r.failures) {
      ++failed;
      std::printf("%s\n  drawn as %s\n  saved to %s\n  reproduce: dsv4h run --case '%s'\n", f.report.c_str(),
                  f.drawn_case.c_str(), f.fixture.c_str(), f.shrunk_case.c_str());
      failures.push_back({{"drawn_case", f.drawn_case}, {"shrunk_case", f.shrunk_case}, {"fixture", f.fixture},
                          {"reproduce", "dsv4h run --case '" + f.shrunk_case + "'"}, {"report", f.report}});
    }
    results.push_back({{"component", r.component}, {"cases", r.cases}, {"replays", r.replays}, {"refused", r.refused},
                       {"seconds", r.seconds}, {"failures", failures}});
  }
  if (args.has("--json"))
    write_json_file(args.get("--json"), {{"schema_version", 1}, {"commit", build_commit()}, {"seed", options.seed},
                                         {"backend", gpu ? "gpu" : "cpu"}, {"device", gpu ? gpu->device_name() : "cpu"},
                                         {"components", results}});
  return failed ? kMismatch : kPass;
}

}  // namespace dsv4h::cli
