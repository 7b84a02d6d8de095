#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "../errors.h"
#include "../json_file.h"
#include "args.h"
#include "commands.h"
#include "perf/compare.h"
#include "perf/html.h"
#include "perf/markdown.h"

namespace dsv4h::cli {

namespace {

using namespace dsv4h::report;

const char* kHelp = R"(usage: dsv4h report compare BASE.json NEW.json [--threshold 0.05] [--alpha 0.05] [--min-change-us 0.5] [--json OUT]
       dsv4h report html --history DIR --out FILE.html [--baseline FILE] [--threshold T] [--alpha A] [--min-change-us U]
       dsv4h report markdown --history DIR --out FILE.md [--baseline FILE] [--threshold T] [--alpha A] [--min-change-us U]

Nightly benchmark reports over history files (reports/history/README.md: Google Benchmark JSON
with every repetition, plus commit, date, device, ceilings, accuracy). dsv4h report SUBCOMMAND
--help for each.
)";

const char* kCompareHelp = R"(usage: dsv4h report compare BASE.json NEW.json [--threshold 0.05] [--alpha 0.05] [--min-change-us 0.5] [--json OUT]

Compares two benchmark files (history files or bare Google Benchmark JSON with repetitions),
benchmark by benchmark: the change of the median time (NEW/BASE - 1), a two-sided Mann-Whitney U
test over the repetitions, and a verdict. Benchmarks in one file only are listed, not compared.
Files timed differently (context.timing: "device", or absent where launches were timed at the
host's rate) or on cards of different names (device.name, where both have one) are not compared:
exit 2.

  --threshold T  relative median change that matters (default 0.05)
  --alpha A      significance level of the test (default 0.05)
  --min-change-us U
                 absolute median change that matters, in microseconds (default 0.5: decode-size
                 benchmarks timed on the device move up to 0.4 us between processes; nights timed
                 at the host's launch rate moved 1.2 us: compare those with 1.5)
  --json OUT     write the comparison as JSON

exit codes: 0 nothing slower, 1 a benchmark slower (p < alpha, change > threshold and > U),
2 bad usage or a malformed file (the message names the file and the field)
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
  return {probability(args, "--threshold", 0.05), probability(args, "--alpha", 0.05),
          microseconds(args, "--min-change-us", CompareOptions{}.min_change_us)};
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!(out << text)) throw std::runtime_error(path + ": cannot write");
}

int compare(std::vector<std::string> argv) {
  const std::set<std::string> valued = {"--threshold", "--alpha", "--min-change-us", "--json"};
  const std::vector<std::string> files = take_positionals(argv, valued);
  const Args args(argv, valued, {"--help"});
  if (args.has("--help")) {
    std::fputs(kCompareHelp, stdout);
    return kPass;
  }
  if (files.size() != 2) throw UsageError("compare needs BASE.json and NEW.json (see --help)");
  if (args.has("--json")) check_writable("--json", args.get("--json"));
  const Comparison c = compare_nights(load_night(files[0]), load_night(files[1]), compare_options(args));
  std::printf("%s -> %s (threshold %.3g, alpha %.3g, min change %.3g us)\n", c.base_label.c_str(),
              c.new_label.c_str(), c.options.threshold, c.options.alpha, c.options.min_change_us);
  for (const BenchmarkComparison& b : c.benchmarks)
    std::printf("%-9s %8s  p=%-7s %s -> %s  %s\n", verdict_name(b.verdict).c_str(), format_change(b.change).c_str(),
                format_p(b.p_value).c_str(), format_time_us(b.base_median_us).c_str(),
                format_time_us(b.new_median_us).c_str(), b.name.c_str());
  for (const std::string& name : c.only_in_base) std::printf("only in %s: %s\n", files[0].c_str(), name.c_str());
  for (const std::string& name : c.only_in_new) std::printf("only in %s: %s\n", files[1].c_str(), name.c_str());
  if (args.has("--json")) write_json_file(args.get("--json"), comparison_to_json(c));
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

}  // namespace

int cmd_report(const std::vector<std::string>& argv) {
  if (argv.empty()) throw UsageError("needs a subcommand: compare, html or markdown (see --help)");
  const std::string sub = argv[0];
  const std::vector<std::string> rest(argv.begin() + 1, argv.end());
  if (sub == "--help") {
    std::fputs(kHelp, stdout);
    return kPass;
  }
  if (sub == "compare") return compare(rest);
  if (sub == "html") return render(rest, kHtmlHelp, render_html);
  if (sub == "markdown") return render(rest, kMarkdownHelp, render_markdown);
  throw UsageError("unknown subcommand \"" + sub + "\" (compare, html, markdown)");
}

}  // namespace dsv4h::cli
