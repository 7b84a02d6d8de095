#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "../component.h"
#include "../errors.h"
#include "../json_file.h"
#include "args.h"
#include "commands.h"
#include "perf/compare.h"
#include "perf/html.h"
#include "perf/markdown.h"
#include "model/listing.h"
#include "perf/status.h"

namespace dsv4h::cli {

namespace {

using namespace dsv4h::report;

const char* kHelp = R"(usage: dsv4h report compare BASE.json NEW.json [--threshold 0.03] [--min-change-us U] [--json OUT]
       dsv4h report html --history DIR --out FILE.html [--baseline FILE] [--threshold T] [--alpha A] [--min-change-us U]
       dsv4h report markdown --history DIR --out FILE.md [--baseline FILE] [--threshold T] [--alpha A] [--min-change-us U]
       dsv4h report status [--records DIR] [--components-from LIST.json] [--markdown OUT.md]

Nightly benchmark reports over history files (reports/history/README.md: Google Benchmark JSON
with every repetition, plus commit, date, device, ceilings, accuracy), and status: the current
GPU verdict of every component from the records of reports/gpu/. dsv4h report SUBCOMMAND --help
for each.
)";

const char* kStatusHelp = R"(usage: dsv4h report status [--records DIR] [--components-from LIST.json] [--markdown OUT.md]

What to read first: per component, the latest GPU run record (reports/gpu/README.md) holding its
tests (and verify cases), its mutants, the sanitizer runs and its benchmark goals, each with the
commit, card and date it came from; the failures each holds, with their messages and reproduction
lines where the record keeps them; and, where the records are in a git checkout, whether the
component's kernel sources (kernels/, with the headers they include) changed after that commit.

  --records DIR      the records (default reports/gpu)
  --components-from LIST.json
                     the components of another build (its `dsv4h list --json`); default this
                     dsv4h's
  --markdown OUT.md  also write the status as markdown (reports/STATUS.md)

exit codes: 0 the status printed (whatever the verdicts), 2 bad usage or a malformed file
)";

const char* kCompareHelp = R"(usage: dsv4h report compare BASE.json NEW.json [--threshold 0.03] [--min-change-us U] [--json OUT]

Compares two benchmark files (history files or bare Google Benchmark JSON with repetitions),
benchmark by benchmark, by the medians of the night's processes of each benchmark binary (the
"process" of each repetition, recorded by ci/history-record): the change of the median of the
process medians (NEW/BASE - 1) against the spread between processes, and a verdict:
  slower/faster  the change exceeds the allowance, max(threshold, 1.5 x the larger relative range
                 of the two nights' process medians), and every process of NEW is above (below)
                 every process of BASE
  too_few        fewer than 3 repetitions in a night: no spread to judge by
  noisy          a change beyond the threshold that is not a verdict
A file of one process (every night before the process tag, a bare Google Benchmark file) has no
spread between processes: the range of its repetitions stands for it, and the allowance is at
least 10% (identical kernels moved up to 8.1% between two H100 nights of one process each).
Benchmarks in one file only are listed, not compared. Files timed differently (context.timing:
"device", or absent where launches were timed at the host's rate) or on cards of different
names (device.name, where both have one) are not compared: exit 2.

  --threshold T  relative change below which nothing is a change (default 0.03)
  --min-change-us U
                 also require an absolute change of more than U microseconds (default 0: off;
                 a fixed floor hides every regression of a decode-size kernel)
  --json OUT     write the comparison as JSON

exit codes: 0 nothing slower, 1 a benchmark slower, 2 bad usage, a malformed file (the message
names the file and the field), no benchmark in common, or a benchmark with too few repetitions
for a verdict (and none slower)
)";

const char* kHtmlHelp = R"(usage: dsv4h report html --history DIR --out FILE.html [--baseline FILE] [--threshold T] [--alpha A] [--min-change-us U]

Writes one self-contained HTML page (no scripts, fonts or network): the latest night of DIR
against the baseline (default: the night before it) as a table of verdicts, regressions first;
per benchmark an SVG chart of the median time and the fraction of the copy ceiling per night,
the baseline marked, and the commit range of any step change found in the history. Only nights
timed as the latest was, on its card (context.timing, device.name), are shown or taken as the
baseline; the page says how many it leaves out.
)";

const char* kMarkdownHelp = R"(usage: dsv4h report markdown --history DIR --out FILE.md [--baseline FILE] [--threshold T] [--alpha A] [--min-change-us U]

Writes the summary for a pull request: the table of verdicts of the latest night of DIR against
the baseline (default: the night before it), regressions first, with each benchmark's step change.
Only nights timed as the latest was, on its card (context.timing, device.name), count, as trend
or as baseline; the summary says how many it leaves out.
)";

// Arguments not starting with "--" (and not the value of a valued option) are positional.
std::vector<std::string> take_positionals(std::vector<std::string>& argv, const std::set<std::string>& valued) {
  std::vector<std::string> positionals, options;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i].rfind("--", 0) != 0) {
      positionals.push_back(argv[i]);
      continue;
    }
    options.push_back(argv[i]);
    if (valued.count(argv[i]) && i + 1 < argv.size()) options.push_back(argv[++i]);
  }
  argv = options;
  return positionals;
}

double probability(const Args& args, const std::string& name, double fallback) {
  if (!args.has(name)) return fallback;
  const std::string s = args.get(name);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v > 0 && v < 1)) throw UsageError(name + " must be a number in (0, 1), got \"" + s + "\"");
  return v;
}

double microseconds(const Args& args, const std::string& name, double fallback) {
  if (!args.has(name)) return fallback;
  const std::string s = args.get(name);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v >= 0 && v < 1e9)) throw UsageError(name + " must be a number >= 0, got \"" + s + "\"");
  return v;
}

CompareOptions compare_options(const Args& args) {
  const CompareOptions defaults;
  return {probability(args, "--threshold", defaults.threshold), defaults.step_threshold,
          probability(args, "--alpha", defaults.alpha), microseconds(args, "--min-change-us", CompareOptions{}.min_change_us)};
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!(out << text)) throw std::runtime_error(path + ": cannot write");
}

int compare(std::vector<std::string> argv) {
  const std::set<std::string> valued = {"--threshold", "--min-change-us", "--json"};
  const std::vector<std::string> files = take_positionals(argv, valued);
  const Args args(argv, valued, {"--help"});
  if (args.has("--help")) {
    std::fputs(kCompareHelp, stdout);
    return kPass;
  }
  if (files.size() != 2) throw UsageError("compare needs BASE.json and NEW.json (see --help)");
  if (args.has("--json")) check_writable("--json", args.get("--json"));
  const Comparison c = compare_nights(load_night(files[0]), load_night(files[1]), compare_options(args));
  std::printf("%s -> %s (threshold %.3g, min change %.3g us)\n", c.base_label.c_str(), c.new_label.c_str(),
              c.options.threshold, c.options.min_change_us);
  for (const BenchmarkComparison& b : c.benchmarks)
    std::printf("%-9s %8s  allowance %-7s processes %zu/%zu  %s -> %s  %s\n", verdict_name(b.verdict).c_str(),
                format_change(b.change).c_str(), format_change(b.allowance).substr(1).c_str(), b.processes_base,
                b.processes_new, format_time_us(b.base_median_us).c_str(), format_time_us(b.new_median_us).c_str(),
                b.name.c_str());
  for (const std::string& name : c.only_in_base) std::printf("only in %s: %s\n", files[0].c_str(), name.c_str());
  for (const std::string& name : c.only_in_new) std::printf("only in %s: %s\n", files[1].c_str(), name.c_str());
  if (args.has("--json")) write_json_file(args.get("--json"), comparison_to_json(c));
  std::printf("%zu slower, %zu faster, %zu unchanged, %zu noisy, %zu with too few repetitions\n",
              c.count(Verdict::slower), c.count(Verdict::faster), c.count(Verdict::unchanged), c.count(Verdict::noisy),
              c.count(Verdict::too_few));
  if (std::any_of(c.benchmarks.begin(), c.benchmarks.end(),
                  [](const auto& b) { return b.processes_base < 2 || b.processes_new < 2; }))
    std::printf("a night of one process has no spread between processes: those verdicts rest on the spread of its "
                "repetitions, with an allowance of at least %.3g%%\n", 100 * kOneProcessAllowance);
  // Passing what was never judged would let a broken night through the gate.
  if (c.benchmarks.empty())
    throw BadInput(files[1] + ": field \"benchmarks\" has no benchmark in common with " + files[0] + ": nothing compared");
  if (c.any_slower()) return kMismatch;
  if (c.count(Verdict::too_few))
    throw BadInput("too few repetitions for a verdict (fewer than " + std::to_string(kMinRepetitions) +
                   " in a night) in " + std::to_string(c.count(Verdict::too_few)) + " benchmarks, e.g. " +
                   std::find_if(c.benchmarks.begin(), c.benchmarks.end(),
                                [](const auto& b) { return b.verdict == Verdict::too_few; })->name);
  return c.any_slower() ? kMismatch : kPass;
}

int render(const std::vector<std::string>& argv, const char* help, std::string (*renderer)(const HistorySummary&)) {
  const Args args(argv, {"--history", "--out", "--baseline", "--threshold", "--alpha", "--min-change-us"}, {"--help"});
  if (args.has("--help")) {
    std::fputs(help, stdout);
    return kPass;
  }
  if (!args.has("--history") || !args.has("--out")) throw UsageError("needs --history DIR and --out FILE (see --help)");
  check_writable("--out", args.get("--out"));
  const HistorySummary s = summarize_history(args.get("--history"), args.get("--baseline"), compare_options(args));
  write_text(args.get("--out"), renderer(s));
  std::printf("wrote %s: %zu nights, %zu benchmarks, latest %s against %s\n", args.get("--out").c_str(),
              s.nights.size(), s.trends.size(), s.comparison.new_label.c_str(), s.comparison.base_label.c_str());
  return kPass;
}

std::vector<StatusComponent> registered_components() {
  std::vector<StatusComponent> components;
  for (const Component& c : registry().all()) {
    StatusComponent s{c.name, {}, c.kernel_sources, c.gpu_tests};
    for (const Mutant& m : c.mutants) s.mutants.push_back(m.name);
    components.push_back(std::move(s));
  }
  // The model is no registry component, but has tests and goals of its own.
  components.push_back({model::listing().name, {}, model_kernel_sources(), model::listing().gpu_tests});
  return components;
}

int status(const std::vector<std::string>& argv) {
  const Args args(argv, {"--records", "--components-from", "--markdown"}, {"--help"});
  if (args.has("--help")) {
    std::fputs(kStatusHelp, stdout);
    return kPass;
  }
  const std::string records = args.has("--records") ? args.get("--records") : "reports/gpu";
  const std::vector<StatusComponent> components =
      args.has("--components-from")
          ? status_components(read_json_file(args.get("--components-from")), args.get("--components-from"))
          : registered_components();
  const Status s = build_status(records, components, git_kernel_changes(records));
  std::fputs(status_text(s).c_str(), stdout);
  if (args.has("--markdown")) write_text(args.get("--markdown"), status_markdown(s));
  return kPass;
}

}  // namespace

int cmd_report(const std::vector<std::string>& argv) {
  if (argv.empty()) throw UsageError("needs a subcommand: compare, html, markdown or status (see --help)");
  const std::string sub = argv[0];
  const std::vector<std::string> rest(argv.begin() + 1, argv.end());
  if (sub == "--help") {
    std::fputs(kHelp, stdout);
    return kPass;
  }
  if (sub == "compare") return compare(rest);
  if (sub == "html") return render(rest, kHtmlHelp, render_html);
  if (sub == "markdown") return render(rest, kMarkdownHelp, render_markdown);
  if (sub == "status") return status(rest);
  throw UsageError("unknown subcommand \"" + sub + "\" (compare, html, markdown, status)");
}

}  // namespace dsv4h::cli
