#include "html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace dsv4h::report {

namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string number(double v, const char* format = "%.4g") {
  char buf[32];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

// Sized for a laptop (1366x768): charts two abreast where they fit, one where not; long
// benchmark names wrap instead of widening the table past the window.
const char* kStyle = R"(
body { font-family: sans-serif; margin: 1em 1.5em; color: #222; max-width: 1400px; }
h1 { font-size: 1.4em; margin: 0.2em 0; } h2 { font-size: 1.15em; margin: 1.2em 0 0.4em; }
p.counts { font-size: 1.2em; margin: 0.3em 0; } .counts b.slower { color: #b00; }
p.night { color: #444; font-size: 0.9em; margin: 0.3em 0; }
table { border-collapse: collapse; margin: 0.5em 0; width: 100%; }
th, td { border: 1px solid #bbb; padding: 0.2em 0.4em; text-align: left; font-size: 0.85em; }
td { white-space: nowrap; } td.name { word-break: break-all; white-space: normal; } th { background: #eee; }
tr.slower td { background: #fdd; } tr.faster td { background: #dfd; } tr.noisy td, tr.too_few td { background: #ffd; }
div.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 0.8em; }
section.benchmark h3 { font-size: 0.85em; margin: 0.2em 0; word-break: break-all; font-weight: normal; }
svg.chart { border: 1px solid #ddd; background: #fff; width: 100%; height: auto; }
.rule { color: #555; font-size: 0.85em; max-width: 60em; }
)";

// Chart geometry: a panel of times with its noise band, below it (for benchmarks that move bytes)
// the fraction of the copy ceiling, and the nights' dates along the shared axis.
constexpr double kWidth = 600, kLeft = 62, kRight = 22, kTop = 22, kTimeHeight = 130, kFractionHeight = 60,
                 kPanelGap = 34, kDateRow = 26;
// The least span of a panel's axis, relative to its middle: a 2% wiggle of a steady benchmark
// fills a tenth of the panel rather than all of it.
constexpr double kMinRelativeSpan = 0.2;

struct Panel {
  double top, height;
  std::string title;
  std::vector<std::optional<double>> values;
  std::vector<std::optional<std::pair<double, double>>> band;  // empty: none
  double scale;  // shown value = value * scale
  const char* format;
};

double night_x(size_t i, size_t nights) {
  const double plot_width = kWidth - kLeft - kRight;
  return nights == 1 ? kLeft + plot_width / 2 : kLeft + plot_width * i / (nights - 1);
}

void draw_panel(std::ostringstream& svg, const Panel& p, const std::vector<Night>& nights) {
  svg << "<text x=\"" << kLeft << "\" y=\"" << p.top - 6 << "\" font-size=\"12\" font-weight=\"bold\">"
      << escape(p.title) << "</text>\n";
  svg << "<rect x=\"" << kLeft << "\" y=\"" << p.top << "\" width=\"" << kWidth - kLeft - kRight << "\" height=\""
      << p.height << "\" fill=\"none\" stroke=\"#ccc\"/>\n";
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& v : p.values)
    if (v) lo = std::min(lo, *v * p.scale), hi = std::max(hi, *v * p.scale);
  for (const auto& b : p.band)
    if (b) lo = std::min(lo, b->first * p.scale), hi = std::max(hi, b->second * p.scale);
  if (lo > hi) {
    svg << "<text x=\"" << kLeft + 10 << "\" y=\"" << p.top + p.height / 2 << "\" font-size=\"12\" fill=\"#888\">"
        << "no data</text>\n";
    return;
  }
  const double middle = 0.5 * (lo + hi);
  const double span = std::max({1.2 * (hi - lo), kMinRelativeSpan * std::fabs(middle), 1e-12});
  lo = middle - span / 2, hi = middle + span / 2;
  auto y = [&](double shown) { return p.top + p.height * (hi - shown) / (hi - lo); };
  for (const double tick : {lo + 0.1 * span, middle, hi - 0.1 * span}) {
    svg << "<line x1=\"" << kLeft << "\" y1=\"" << y(tick) << "\" x2=\"" << kWidth - kRight << "\" y2=\"" << y(tick)
        << "\" stroke=\"#eee\"/><text x=\"" << kLeft - 5 << "\" y=\"" << y(tick) + 4
        << "\" font-size=\"11\" text-anchor=\"end\">" << number(tick, p.format) << "</text>\n";
  }
  const size_t n = nights.size();
  if (!p.band.empty()) {
    svg << "<polygon class=\"band\" fill=\"#2466b0\" fill-opacity=\"0.15\" points=\"";
    for (size_t i = 0; i < n; ++i)
      if (p.band[i]) svg << night_x(i, n) << "," << y(p.band[i]->second * p.scale) << " ";
    for (size_t i = n; i-- > 0;)
      if (p.band[i]) svg << night_x(i, n) << "," << y(p.band[i]->first * p.scale) << " ";
    svg << "\"/>\n";
  }
  svg << "<polyline fill=\"none\" stroke=\"#2466b0\" stroke-width=\"1.5\" points=\"";
  for (size_t i = 0; i < n; ++i)
    if (p.values[i]) svg << night_x(i, n) << "," << y(*p.values[i] * p.scale) << " ";
  svg << "\"/>\n";
  for (size_t i = 0; i < n; ++i) {
    if (!p.values[i]) continue;
    svg << "<circle cx=\"" << night_x(i, n) << "\" cy=\"" << y(*p.values[i] * p.scale) << "\" r=\"2.5\" fill=\"#2466b0\"><title>"
        << escape(nights[i].label()) << ": " << number(*p.values[i] * p.scale, p.format) << "</title></circle>\n";
  }
}

// The nights' dates (MM-DD) under the axis, thinned so that labels never overlap.
void draw_dates(std::ostringstream& svg, double top, const std::vector<Night>& nights) {
  const size_t n = nights.size();
  double last_x = -INFINITY;
  for (size_t i = 0; i < n; ++i) {
    const double x = night_x(i, n);
    if (x - last_x < 44 || (i + 1 < n && night_x(n - 1, n) - x < 44)) continue;
    svg << "<line x1=\"" << x << "\" y1=\"" << top - 4 << "\" x2=\"" << x << "\" y2=\"" << top
        << "\" stroke=\"#999\"/><text class=\"date\" x=\"" << x << "\" y=\"" << top + 12
        << "\" font-size=\"11\" text-anchor=\"middle\">" << escape(nights[i].date.substr(5)) << "</text>\n";
    last_x = x;
  }
}

std::string chart(const Trend& t, const HistorySummary& s) {
  const size_t n = s.nights.size();
  const bool has_fraction = std::any_of(t.fraction_of_ceiling.begin(), t.fraction_of_ceiling.end(),
                                        [](const auto& v) { return v.has_value(); });
  const double bottom = kTop + kTimeHeight + (has_fraction ? kPanelGap + kFractionHeight : 0);
  const double height = bottom + kDateRow;
  std::ostringstream svg;
  svg << "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << kWidth << " " << height << "\" role=\"img\" aria-label=\"trend of "
      << escape(t.name) << "\">\n";
  draw_panel(svg, {kTop, kTimeHeight, "median time (us); band: spread between processes", t.median_us, t.band_us, 1.0,
                   "%.4g"},
             s.nights);
  if (has_fraction)
    draw_panel(svg, {kTop + kTimeHeight + kPanelGap, kFractionHeight, "fraction of the copy ceiling (%)",
                     t.fraction_of_ceiling, {}, 100.0, "%.3g"},
               s.nights);
  draw_dates(svg, bottom + 4, s.nights);
  if (s.baseline_index) {
    const double x = night_x(*s.baseline_index, n);
    svg << "<line class=\"baseline\" x1=\"" << x << "\" y1=\"" << kTop << "\" x2=\"" << x << "\" y2=\"" << bottom
        << "\" stroke=\"#555\" stroke-dasharray=\"4,3\"/>\n<text x=\"" << x + 3 << "\" y=\"" << kTop + 12
        << "\" font-size=\"11\" fill=\"#555\">baseline</text>\n";
  }
  if (t.step) {
    const double x = 0.5 * (night_x(t.step->index - 1, n) + night_x(t.step->index, n));
    svg << "<line class=\"step\" x1=\"" << x << "\" y1=\"" << kTop << "\" x2=\"" << x << "\" y2=\"" << bottom
        << "\" stroke=\"#c0392b\" stroke-width=\"2\"/>\n<text x=\"" << x + 3 << "\" y=\"" << kTop + kTimeHeight - 4
        << "\" font-size=\"11\" fill=\"#c0392b\">step " << format_change(t.step->change) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

// The indices of s.trends (the comparison's rows first) of kernels, or of floors and ceilings.
std::vector<size_t> group(const HistorySummary& s, bool floors_and_ceilings) {
  std::vector<size_t> indices;
  for (size_t i = 0; i < s.trends.size(); ++i)
    if (is_floor_or_ceiling(s.trends[i].name) == floors_and_ceilings) indices.push_back(i);
  return indices;
}

void summary_table(std::ostringstream& html, const HistorySummary& s, const std::vector<size_t>& indices,
                   const std::string& id) {
  html << "<table class=\"summary\" id=\"" << id << "\">\n<thead><tr><th>benchmark</th><th>verdict</th>"
          "<th>baseline</th><th>latest</th><th>change</th><th>allowance</th><th>processes</th>"
          "<th>of copy ceiling</th><th>step change</th></tr></thead>\n<tbody>\n";
  for (size_t i : indices) {
    if (i >= s.comparison.benchmarks.size()) continue;  // in one night only: listed apart
    const BenchmarkComparison& b = s.comparison.benchmarks[i];
    const Trend& t = s.trends[i];
    const std::string verdict = verdict_name(b.verdict);
    html << "<tr class=\"" << verdict << "\" data-verdict=\"" << verdict << "\"><td class=\"name\"><a href=\"#b" << i
         << "\">" << escape(b.name) << "</a></td><td>" << verdict << "</td><td>" << format_time_us(b.base_median_us)
         << "</td><td>" << format_time_us(b.new_median_us) << "</td><td>" << format_change(b.change) << "</td><td>"
         << format_change(b.allowance).substr(1) << "</td><td>" << b.processes_base << " / " << b.processes_new
         << "</td><td>" << (b.new_fraction_of_ceiling ? number(100 * *b.new_fraction_of_ceiling, "%.3g%%") : "-")
         << "</td><td>" << (t.step ? format_change(t.step->change) + " " + escape(t.step_range) : "none")
         << "</td></tr>\n";
  }
  html << "</tbody>\n</table>\n";
}

void charts(std::ostringstream& html, const HistorySummary& s, const std::vector<size_t>& indices) {
  html << "<div class=\"charts\">\n";
  for (size_t i : indices) {
    const Trend& t = s.trends[i];
    const std::string verdict =
        i < s.comparison.benchmarks.size() ? verdict_name(s.comparison.benchmarks[i].verdict) : "not compared";
    html << "<section class=\"benchmark\" id=\"b" << i << "\">\n<h3>" << escape(t.name) << " <b>" << verdict
         << "</b></h3>\n" << chart(t, s) << "</section>\n";
  }
  html << "</div>\n";
}

void lists_and_accuracy(std::ostringstream& html, const HistorySummary& s) {
  for (const auto& [title, names] : {std::pair{"Only in the latest night (not compared)", s.comparison.only_in_new},
                                     std::pair{"Only in the baseline (not compared)", s.comparison.only_in_base}}) {
    if (names.empty()) continue;
    html << "<h2>" << title << "</h2>\n<ul>\n";
    for (const std::string& name : names) html << "<li>" << escape(name) << "</li>\n";
    html << "</ul>\n";
  }
  const Night& latest = s.nights.back();
  if (latest.accuracy.empty()) return;
  html << "<h2>Accuracy</h2>\n<table id=\"accuracy\">\n<thead><tr><th>case</th><th>tolerance budget used</th></tr>"
          "</thead>\n<tbody>\n";
  for (const AccuracyEntry& a : latest.accuracy)
    html << "<tr><td>" << escape(a.test_case) << "</td><td>" << number(a.budget_used, "%.3g") << "</td></tr>\n";
  html << "</tbody>\n</table>\n";
}

}  // namespace

// The counts and the device first: what a reader of the night needs before any table.
std::string render_html(const HistorySummary& s) {
  const Comparison& c = s.comparison;
  const Night& latest = s.nights.back();
  const std::string left_out = left_out_note(s);
  const std::string device = latest.device_name.empty() ? "an unnamed device" : latest.device_name;
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
       << "<title>dsv4h nightly benchmarks: " << escape(latest.label()) << "</title>\n<style>" << kStyle
       << "</style>\n</head>\n<body>\n<h1 id=\"device\">Nightly benchmarks on " << escape(device) << "</h1>\n"
       << "<p class=\"counts\" id=\"counts\"><b class=\"slower\">" << c.count(Verdict::slower) << " slower</b>, <b>"
       << c.count(Verdict::faster) << " faster</b>, <b>" << c.count(Verdict::unchanged) << " unchanged</b>"
       << ", " << c.count(Verdict::noisy) << " noisy, " << c.count(Verdict::too_few) << " with too few repetitions"
       << " of " << c.benchmarks.size() << " compared</p>\n<p class=\"night\">latest night " << escape(c.new_label)
       << " against baseline " << escape(c.base_label) << "; " << s.nights.size() << " nights from "
       << escape(s.nights.front().date) << " to " << escape(latest.date) << ". Driver "
       << escape(latest.device_driver.empty() ? "?" : latest.device_driver);
  for (const auto& [clock, value] : latest.device_clocks) html << ", " << escape(clock) << " " << escape(value);
  html << "; ceilings: copy "
       << (latest.copy_ceiling_GBps ? number(*latest.copy_ceiling_GBps, "%.1f") + " GB/s" : "not measured")
       << ", bf16 matrix product "
       << (latest.bf16_matmul_TFLOPs ? number(*latest.bf16_matmul_TFLOPs, "%.1f") + " TFLOP/s" : "not measured")
       << "</p>\n" << (left_out.empty() ? std::string() : "<p class=\"night\">" + escape(left_out) + "</p>\n");
  if (std::any_of(c.benchmarks.begin(), c.benchmarks.end(),
                  [](const auto& b) { return b.processes_base < 2 || b.processes_new < 2; }))
    html << "<p class=\"night\">A night of one process has no spread between processes: its verdicts rest on "
            "the spread of its repetitions, with an allowance of at least "
         << number(100 * kOneProcessAllowance, "%.3g%%") << ".</p>\n";
  const std::vector<size_t> kernels = group(s, false), floors = group(s, true);
  html << "<h2>Kernels</h2>\n";
  summary_table(html, s, kernels, "summary-kernels");
  html << "<h2>Floors and ceilings</h2>\n<p class=\"rule\">What the machine allows rather than what our kernels "
          "do: launch and latency floors, copy kernels and copies of a kernel's bytes (tests/bench/floors/).</p>\n";
  summary_table(html, s, floors, "summary-floors");
  lists_and_accuracy(html, s);
  html << "<h2>Trends: kernels</h2>\n";
  charts(html, s, kernels);
  html << "<h2>Trends: floors and ceilings</h2>\n";
  charts(html, s, floors);
  html << "<p class=\"rule\">" << escape(kVerdictRule) << " (threshold " << number(100 * c.options.threshold, "%.3g%%")
       << "). Step change: the split of the nightly medians that maximises the shift of the median relative "
       << "to the pooled spread, kept when the Mann-Whitney test between its sides gives p &lt; "
       << number(c.options.alpha, "%.3g") << " and the shift exceeds "
       << number(100 * c.options.step_threshold, "%.3g%%") << ".</p>\n</body>\n</html>\n";
  return html.str();
}

}  // namespace dsv4h::report
