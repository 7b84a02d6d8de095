#include "compare.h"

#include <algorithm>
#include <cmath>

#include "harness/errors.h"
#include "stats.h"

namespace dsv4h::report {

const char* const kVerdictRule =
    "slower/faster: the median changed by more than the threshold (and by more than min_change_us) "
    "and the Mann-Whitney test gives p < alpha; noisy: the median changed that much without p < "
    "alpha, or either night's coefficient of variation exceeds twice the threshold; unchanged: "
    "otherwise";

std::string verdict_name(Verdict v) {
  switch (v) {
    case Verdict::slower: return "slower";
    case Verdict::noisy: return "noisy";
    case Verdict::faster: return "faster";
    case Verdict::unchanged: return "unchanged";
  }
  return "?";
}

namespace {

// kVerdictRule. A significant change beyond the threshold is a verdict even when the spread is
// large: the test has already weighed the spread.
Verdict judge(const BenchmarkComparison& b, const CompareOptions& o) {
  const double change = b.change, p_value = b.p_value, cv_base = b.cv_base, cv_new = b.cv_new;
  const bool beyond_threshold =
      std::fabs(change) > o.threshold && std::fabs(b.new_median_us - b.base_median_us) > o.min_change_us;
  if (beyond_threshold && p_value < o.alpha) return change > 0 ? Verdict::slower : Verdict::faster;
  if (beyond_threshold || std::max(cv_base, cv_new) > 2 * o.threshold) return Verdict::noisy;
  return Verdict::unchanged;
}

}  // namespace

bool Comparison::any_slower() const {
  return std::any_of(benchmarks.begin(), benchmarks.end(), [](const auto& b) { return b.verdict == Verdict::slower; });
}

std::string timing_name(const Night& night) {
  return night.timing.empty() ? "absent (launches timed at the host's rate)" : "\"" + night.timing + "\"";
}

bool same_device(const Night& a, const Night& b) {
  return a.device_name.empty() || b.device_name.empty() || a.device_name == b.device_name;
}

Comparison compare_nights(const Night& base, const Night& now, const CompareOptions& options) {
  // A change of timing method moves every launch-bound time at once (an empty kernel: 3.5 us at
  // the host's launch rate, 1.4 us on the device): no verdict of such a pair would mean anything.
  if (base.timing != now.timing)
    throw BadInput(now.path + ": field \"context.timing\" is " + timing_name(now) + ", in " + base.path + " " +
                   timing_name(base) + ": nights timed differently are not compared");
  if (!same_device(base, now))
    throw BadInput(now.path + ": field \"device.name\" is \"" + now.device_name + "\", in " + base.path + " \"" +
                   base.device_name + "\": nights on different cards are not compared");
  Comparison c{base.label(), now.label(), options, {}, {}, {}};
  for (const auto& [name, samples] : base.benchmarks)
    if (!now.benchmarks.count(name)) c.only_in_base.push_back(name);
  for (const auto& [name, samples] : now.benchmarks) {
    auto it = base.benchmarks.find(name);
    if (it == base.benchmarks.end()) {
      c.only_in_new.push_back(name);
      continue;
    }
    const std::vector<double>& before = it->second.times_us;
    const std::vector<double>& after = samples.times_us;
    BenchmarkComparison b;
    b.name = name;
    b.base_median_us = median(before);
    b.new_median_us = median(after);
    b.change = b.new_median_us / b.base_median_us - 1;
    b.p_value = mann_whitney(after, before).p_value;
    b.cv_base = coefficient_of_variation(before);
    b.cv_new = coefficient_of_variation(after);
    b.n_base = before.size();
    b.n_new = after.size();
    if (!samples.fraction_of_ceiling.empty()) b.new_fraction_of_ceiling = median(samples.fraction_of_ceiling);
    b.verdict = judge(b, options);
    c.benchmarks.push_back(b);
  }
  // Regressions first, the largest first; within the other verdicts by name.
  std::stable_sort(c.benchmarks.begin(), c.benchmarks.end(), [](const auto& x, const auto& y) {
    if (x.verdict != y.verdict) return x.verdict < y.verdict;
    return x.verdict == Verdict::slower && x.change > y.change;
  });
  return c;
}

nlohmann::json comparison_to_json(const Comparison& c) {
  nlohmann::json rows = nlohmann::json::array();
  for (const BenchmarkComparison& b : c.benchmarks)
    rows.push_back({{"name", b.name}, {"verdict", verdict_name(b.verdict)}, {"base_median_us", b.base_median_us},
                    {"new_median_us", b.new_median_us}, {"change", b.change}, {"p_value", b.p_value},
                    {"cv_base", b.cv_base}, {"cv_new", b.cv_new}, {"n_base", b.n_base}, {"n_new", b.n_new},
                    {"new_fraction_of_ceiling", b.new_fraction_of_ceiling ? nlohmann::json(*b.new_fraction_of_ceiling)
                                                                          : nlohmann::json()}});
  return {{"base", c.base_label}, {"new", c.new_label}, {"threshold", c.options.threshold},
          {"min_change_us", c.options.min_change_us},
          {"alpha", c.options.alpha}, {"rule", kVerdictRule}, {"slower", c.any_slower()},
          {"benchmarks", rows}, {"only_in_base", c.only_in_base}, {"only_in_new", c.only_in_new}};
}

}  // namespace dsv4h::report
