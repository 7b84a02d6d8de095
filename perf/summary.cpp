#include "summary.h"

#include <algorithm>
#include <cstdio>

#include "harness/errors.h"

namespace dsv4h::report {

namespace {

Trend trend_of(const std::string& name, const std::vector<Night>& nights, const CompareOptions& options) {
  Trend t;
  t.name = name;
  std::vector<double> present_medians;
  std::vector<size_t> present_nights;
  for (size_t i = 0; i < nights.size(); ++i) {
    auto it = nights[i].benchmarks.find(name);
    if (it == nights[i].benchmarks.end()) {
      t.median_us.emplace_back();
      t.band_us.emplace_back();
      t.fraction_of_ceiling.emplace_back();
      continue;
    }
    t.median_us.push_back(median(it->second.times_us));
    const std::vector<double> processes = process_medians(it->second);
    const std::vector<double>& spread = processes.size() > 1 ? processes : it->second.times_us;
    const auto [low, high] = std::minmax_element(spread.begin(), spread.end());
    t.band_us.emplace_back(std::pair{*low, *high});
    t.fraction_of_ceiling.push_back(it->second.fraction_of_ceiling.empty()
                                        ? std::nullopt
                                        : std::optional<double>(median(it->second.fraction_of_ceiling)));
    present_medians.push_back(*t.median_us.back());
    present_nights.push_back(i);
  }
  // Nights without the benchmark are left out of the series, so the step lies between the last
  // night before it that ran the benchmark and the first one after.
  t.step = detect_step(present_medians, options.step_threshold, options.alpha);
  if (t.step) {
    const size_t first_after = present_nights[t.step->index];
    const size_t last_before = present_nights[t.step->index - 1];
    t.step->index = first_after;
    t.step_range = "after " + nights[last_before].label() + " up to " + nights[first_after].label();
  }
  return t;
}

}  // namespace

HistorySummary summarize_history(const std::string& dir, const std::string& baseline_path,
                                 const CompareOptions& options) {
  HistorySummary s;
  std::vector<Night> all = load_history(dir);
  // The latest night's series: its timing and its card's exact name. A night naming no card is a
  // series of its own, not a match for every card (same_device's leniency is for a bare file).
  const std::string timing = all.back().timing, card = all.back().device_name;
  for (Night& night : all) {
    if (night.timing != timing) ++s.nights_timed_otherwise;
    else if (night.device_name != card) ++s.nights_on_other_cards;
    else s.nights.push_back(std::move(night));
  }
  if (!baseline_path.empty()) {
    s.baseline = load_night(baseline_path);
    for (size_t i = 0; i < s.nights.size(); ++i)
      if (s.nights[i].commit == s.baseline.commit && s.nights[i].date == s.baseline.date) s.baseline_index = i;
  } else {
    // The first night of a history (or of a timing method, or on a card) is its own baseline: it
    // renders, every verdict "unchanged".
    s.baseline_index = s.nights.size() - (s.nights.size() < 2 ? 1 : 2);
    s.baseline = s.nights[*s.baseline_index];
  }
  s.comparison = compare_nights(s.baseline, s.nights.back(), options);
  for (const BenchmarkComparison& b : s.comparison.benchmarks) s.trends.push_back(trend_of(b.name, s.nights, options));
  for (const auto& names : {s.comparison.only_in_new, s.comparison.only_in_base})
    for (const std::string& name : names) s.trends.push_back(trend_of(name, s.nights, options));
  return s;
}

bool is_floor_or_ceiling(const std::string& benchmark) {
  const std::string family = benchmark.substr(0, benchmark.find('/'));
  const auto starts = [&](const std::string& prefix) { return family.rfind(prefix, 0) == 0; };
  const bool floor_suffix = family.size() > 6 && family.compare(family.size() - 6, 6, "_floor") == 0;
  return starts("BM_empty_kernel") || starts("BM_dependent_loads") || starts("BM_copy_") || floor_suffix;
}

std::string left_out_note(const HistorySummary& s) {
  const auto earlier_nights = [](size_t n) {
    return std::to_string(n) + (n == 1 ? " earlier night was" : " earlier nights were");
  };
  std::string note;
  if (s.nights_timed_otherwise)
    note += earlier_nights(s.nights_timed_otherwise) + " timed otherwise (context.timing) and not shown.";
  if (s.nights_on_other_cards)
    note += (note.empty() ? "" : " ") + earlier_nights(s.nights_on_other_cards) +
            " run on another card (device.name) and not shown.";
  return note;
}

std::string format_change(double change) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%+.1f%%", 100 * change);
  return buf;
}

std::string format_time_us(double us) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g us", us);
  return buf;
}

}  // namespace dsv4h::report
