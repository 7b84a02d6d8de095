#include "markdown.h"

#include <algorithm>
#include <sstream>

namespace dsv4h::report {

namespace {

// Names and labels come from files anyone can write: a "|" would split the table's row and a line
// break would end it, so both are neutralised in every cell.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else out += c == '\n' || c == '\r' ? ' ' : c;
  }
  return out;
}

// A name as a code span: its fence is one backtick longer than the longest run inside it
// (CommonMark), padded with spaces where the name itself starts or ends with a backtick.
std::string code(const std::string& name) {
  size_t longest = 0, run = 0;
  for (char c : name) longest = std::max(longest, run = c == '`' ? run + 1 : 0);
  const std::string fence(longest + 1, '`');
  const bool pad = !name.empty() && (name.front() == '`' || name.back() == '`');
  return fence + (pad ? " " : "") + cell(name) + (pad ? " " : "") + fence;
}

}  // namespace

std::string render_markdown(const HistorySummary& s) {
  const Comparison& c = s.comparison;
  const std::string left_out = left_out_note(s);
  std::ostringstream md;
  size_t slower = 0;
  for (const BenchmarkComparison& b : c.benchmarks) slower += b.verdict == Verdict::slower;
  md << "## Nightly benchmarks: " << cell(c.new_label) << " against " << cell(c.base_label) << "\n\n"
     << (slower ? "**" + std::to_string(slower) + " slower**" : std::string("no regression")) << " among "
     << c.benchmarks.size() << " benchmarks (threshold " << format_change(c.options.threshold).substr(1)
     << ").\n\n"
     << (left_out.empty() ? std::string() : left_out + "\n\n")
     << "| verdict | benchmark | baseline | latest | change | allowance | step change |\n"
     << "|---|---|---|---|---|---|---|\n";
  for (size_t i = 0; i < c.benchmarks.size(); ++i) {
    const BenchmarkComparison& b = c.benchmarks[i];
    const Trend& t = s.trends[i];
    const std::string verdict = verdict_name(b.verdict);
    md << "| " << (b.verdict == Verdict::slower ? "**" + verdict + "**" : verdict) << " | " << code(b.name) << " | "
       << format_time_us(b.base_median_us) << " | " << format_time_us(b.new_median_us) << " | "
       << format_change(b.change) << " | " << format_change(b.allowance).substr(1) << " | "
       << (t.step ? format_change(t.step->change) + " " + cell(t.step_range) : "none") << " |\n";
  }
  for (const auto& [title, names] : {std::pair{"Only in the latest night", c.only_in_new},
                                     std::pair{"Only in the baseline", c.only_in_base}}) {
    if (names.empty()) continue;
    md << "\n" << title << " (not compared):\n";
    for (const std::string& name : names) md << "- " << code(name) << "\n";
  }
  md << "\n<sub>" << kVerdictRule << ".</sub>\n";
  return md.str();
}

}  // namespace dsv4h::report
