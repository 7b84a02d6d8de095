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

const char* kStyle = R"(
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #bbb; padding: 0.3em 0.6em; text-align: left; font-size: 0.9em; }
th { background: #eee; }
tr.slower td { background: #fdd; } tr.faster td { background: #dfd; } tr.noisy td { background: #ffd; }
section.benchmark { margin: 2em 0; }
svg.chart { border: 1px solid #ddd; background: #fff; }
.rule { color: #555; font-size: 0.85em; max-width: 60em; }
)";

// Chart geometry: two panels sharing the night axis.
constexpr double kWidth = 760, kLeft = 80, kRight = 20, kPanelHeight = 130, kPanelGap = 50, kTop = 25;

struct Panel {
  double top;
  std::string title;
  std::vector<std::optional<double>> values;
  double scale;  // shown value = value * scale
  const char* format;
};

double night_x(size_t i, size_t nights) {
  const double plot_width = kWidth - kLeft - kRight;
  return nights == 1 ? kLeft + plot_width / 2 : kLeft + plot_width * i / (nights - 1);
}

void draw_panel(std::ostringstream& svg, const Panel& p, const std::vector<Night>& nights) {
  svg << "<text x=\"" << kLeft << "\" y=\"" << p.top - 8 << "\" font-size=\"13\" font-weight=\"bold\">"
      << escape(p.title) << "</text>\n";
  svg << "<rect x=\"" << kLeft << "\" y=\"" << p.top << "\" width=\"" << kWidth - kLeft - kRight << "\" height=\""
      << kPanelHeight << "\" fill=\"none\" stroke=\"#ccc\"/>\n";
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& v : p.values)
    if (v) lo = std::min(lo, *v * p.scale), hi = std::max(hi, *v * p.scale);
  if (lo > hi) {
    svg << "<text x=\"" << kLeft + 10 << "\" y=\"" << p.top + kPanelHeight / 2 << "\" font-size=\"12\" fill=\"#888\">"
        << "no data</text>\n";
    return;
  }
  const double pad = hi > lo ? 0.1 * (hi - lo) : std::max(0.05 * std::fabs(hi), 1e-12);
  lo -= pad, hi += pad;
  auto y = [&](double shown) { return p.top + kPanelHeight * (hi - shown) / (hi - lo); };
  svg << "<text x=\"" << kLeft - 6 << "\" y=\"" << y(hi - pad) + 4 << "\" font-size=\"11\" text-anchor=\"end\">"
      << number(hi - pad, p.format) << "</text>\n";
  svg << "<text x=\"" << kLeft - 6 << "\" y=\"" << y(lo + pad) + 4 << "\" font-size=\"11\" text-anchor=\"end\">"
      << number(lo + pad, p.format) << "</text>\n";
  svg << "<polyline fill=\"none\" stroke=\"#2466b0\" stroke-width=\"1.5\" points=\"";
  for (size_t i = 0; i < p.values.size(); ++i)
    if (p.values[i]) svg << night_x(i, nights.size()) << "," << y(*p.values[i] * p.scale) << " ";
  svg << "\"/>\n";
  for (size_t i = 0; i < p.values.size(); ++i) {
    if (!p.values[i]) continue;
    svg << "<circle cx=\"" << night_x(i, nights.size()) << "\" cy=\"" << y(*p.values[i] * p.scale)
        << "\" r=\"3\" fill=\"#2466b0\"><title>" << escape(nights[i].label()) << ": "
        << number(*p.values[i] * p.scale, p.format) << "</title></circle>\n";
  }
}

std::string chart(const Trend& t, const HistorySummary& s) {
  const size_t n = s.nights.size();
  const double height = kTop + 2 * kPanelHeight + kPanelGap + 30;
  const double bottom = kTop + 2 * kPanelHeight + kPanelGap;
  std::ostringstream svg;
  svg << "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << kWidth << " " << height << "\" role=\"img\" aria-label=\"trend of "
      << escape(t.name) << "\">\n";
  draw_panel(svg, {kTop, "median time per night (us)", t.median_us, 1.0, "%.4g"}, s.nights);
  draw_panel(svg, {kTop + kPanelHeight + kPanelGap, "fraction of the copy ceiling per night (%)",
                   t.fraction_of_ceiling, 100.0, "%.3g"},
             s.nights);
  if (s.baseline_index) {
    const double x = night_x(*s.baseline_index, n);
    svg << "<line class=\"baseline\" x1=\"" << x << "\" y1=\"" << kTop << "\" x2=\"" << x << "\" y2=\"" << bottom
        << "\" stroke=\"#555\" stroke-dasharray=\"4,3\"/>\n<text x=\"" << x + 3 << "\" y=\"" << kTop + 12
        << "\" font-size=\"11\" fill=\"#555\">baseline</text>\n";
  }
  if (t.step) {
    const double x = 0.5 * (night_x(t.step->index - 1, n) + night_x(t.step->index, n));
    svg << "<line class=\"step\" x1=\"" << x << "\" y1=\"" << kTop << "\" x2=\"" << x << "\" y2=\"" << bottom
        << "\" stroke=\"#c0392b\" stroke-width=\"2\"/>\n<text x=\"" << x + 3 << "\" y=\"" << bottom - 4
        << "\" font-size=\"11\" fill=\"#c0392b\">step " << format_change(t.step->change) << "</text>\n";
  }
  svg << "<text x=\"" << kLeft << "\" y=\"" << height - 8 << "\" font-size=\"11\">" << escape(s.nights.front().date)
      << "</text>\n<text x=\"" << kWidth - kRight << "\" y=\"" << height - 8
      << "\" font-size=\"11\" text-anchor=\"end\">" << escape(s.nights.back().date) << "</text>\n</svg>\n";
  return svg.str();
}

void summary_table(std::ostringstream& html, const HistorySummary& s) {
  html << "<table id=\"summary\">\n<thead><tr><th>benchmark</th><th>verdict</th><th>baseline median</th>"
          "<th>latest median</th><th>change</th><th>allowance</th><th>processes</th>"
          "<th>fraction of copy ceiling</th><th>step change</th></tr></thead>\n<tbody>\n";
  for (size_t i = 0; i < s.comparison.benchmarks.size(); ++i) {
    const BenchmarkComparison& b = s.comparison.benchmarks[i];
    const Trend& t = s.trends[i];
    const std::string verdict = verdict_name(b.verdict);
    html << "<tr class=\"" << verdict << "\" data-verdict=\"" << verdict << "\"><td><a href=\"#b" << i << "\">"
         << escape(b.name) << "</a></td><td>" << verdict << "</td><td>" << format_time_us(b.base_median_us)
         << "</td><td>" << format_time_us(b.new_median_us) << "</td><td>" << format_change(b.change) << "</td><td>"
         << format_change(b.allowance).substr(1) << "</td><td>" << b.processes_base << " / " << b.processes_new
         << "</td><td>"
         << (b.new_fraction_of_ceiling ? number(100 * *b.new_fraction_of_ceiling, "%.3g%%") : "-") << "</td><td>"
         << (t.step ? format_change(t.step->change) + " " + escape(t.step_range) : "none") << "</td></tr>\n";
  }
  html << "</tbody>\n</table>\n";
}

void lists_and_night(std::ostringstream& html, const HistorySummary& s) {
  for (const auto& [title, names] : {std::pair{"Only in the latest night (not compared)", s.comparison.only_in_new},
                                     std::pair{"Only in the baseline (not compared)", s.comparison.only_in_base}}) {
    if (names.empty()) continue;
    html << "<h3>" << title << "</h3>\n<ul>\n";
    for (const std::string& name : names) html << "<li>" << escape(name) << "</li>\n";
    html << "</ul>\n";
  }
  const Night& latest = s.nights.back();
  html << "<h3>Latest night</h3>\n<p>device: " << escape(latest.device_name.empty() ? "?" : latest.device_name)
       << ", driver " << escape(latest.device_driver.empty() ? "?" : latest.device_driver);
  for (const auto& [clock, value] : latest.device_clocks) html << ", " << escape(clock) << " " << escape(value);
  html << "<br>ceilings: copy "
       << (latest.copy_ceiling_GBps ? number(*latest.copy_ceiling_GBps, "%.1f") + " GB/s" : "not measured")
       << ", bf16 matrix product "
       << (latest.bf16_matmul_TFLOPs ? number(*latest.bf16_matmul_TFLOPs, "%.1f") + " TFLOP/s" : "not measured")
       << "</p>\n";
  if (latest.accuracy.empty()) return;
  html << "<table id=\"accuracy\">\n<thead><tr><th>case</th><th>tolerance budget used</th></tr></thead>\n<tbody>\n";
  for (const AccuracyEntry& a : latest.accuracy)
    html << "<tr><td>" << escape(a.test_case) << "</td><td>" << number(a.budget_used, "%.3g") << "</td></tr>\n";
  html << "</tbody>\n</table>\n";
}

}  // namespace

std::string render_html(const HistorySummary& s) {
  const Comparison& c = s.comparison;
  const std::string left_out = left_out_note(s);
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       << "<title>dsv4h nightly benchmarks: " << escape(s.nights.back().label()) << "</title>\n<style>" << kStyle
       << "</style>\n</head>\n<body>\n<h1>Nightly benchmarks</h1>\n<p>latest night " << escape(c.new_label)
       << " against baseline " << escape(c.base_label) << "; " << s.nights.size() << " nights from "
       << escape(s.nights.front().date) << " to " << escape(s.nights.back().date) << "; threshold "
       << number(100 * c.options.threshold, "%.3g%%") << ", alpha " << number(c.options.alpha, "%.3g") << "</p>\n"
       << (left_out.empty() ? std::string() : "<p>" + escape(left_out) + "</p>\n")
       << "<p class=\"rule\">" << escape(kVerdictRule) << ". Step change: the split of the nightly medians that "
       << "maximises the shift of the median relative to the pooled spread, kept when the Mann-Whitney test "
       << "between its sides gives p &lt; alpha and the shift exceeds the threshold.</p>\n";
  summary_table(html, s);
  lists_and_night(html, s);
  for (size_t i = 0; i < s.trends.size(); ++i) {
    const Trend& t = s.trends[i];
    html << "<section class=\"benchmark\" id=\"b" << i << "\">\n<h2>" << escape(t.name) << "</h2>\n<p>"
         << (i < c.benchmarks.size() ? "verdict: " + verdict_name(c.benchmarks[i].verdict) : std::string("not compared"))
         << "; step change: " << (t.step ? format_change(t.step->change) + " " + escape(t.step_range) : "none")
         << "</p>\n" << chart(t, s) << "</section>\n";
  }
  html << "</body>\n</html>\n";
  return html.str();
}

}  // namespace dsv4h::report
