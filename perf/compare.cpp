#include "compare.h"

#include <algorithm>
#include <cmath>

#include "harness/errors.h"
#include "stats.h"

namespace dsv4h::report {

const char* const kVerdictRule =
    "per benchmark, the median of each process's repetitions; slower/faster: the median of those "
    "changed by more than the allowance, max(threshold, 1.5 x the larger relative range of process "
    "medians; at least 10% where a night has one process, whose range is that of its repetitions), "
    "and every process of one night is above every process of the other; too_few: fewer than 3 "
    "repetitions in a night; noisy: a change beyond the threshold that is not a verdict; "
    "unchanged: otherwise";

std::string verdict_name(Verdict v) {
  switch (v) {
    case Verdict::slower: return "slower";
    case Verdict::too_few: return "too_few";
    case Verdict::noisy: return "noisy";
    case Verdict::faster: return "faster";
    case Verdict::unchanged: return "unchanged";
  }
  return "?";
}

namespace {

double relative_range(const std::vector<double>& values) {
  const auto [low, high] = std::minmax_element(values.begin(), values.end());
  return (*high - *low) / median(values);
}

// The rule in compare.h.
BenchmarkComparison compare_benchmark(const std::string& name, const BenchmarkSamples& before,
                                      const BenchmarkSamples& after, const CompareOptions& o) {
  const std::vector<double> base = process_medians(before), now = process_medians(after);
  BenchmarkComparison b;
  b.name = name;
  b.base_median_us = median(base);
  b.new_median_us = median(now);
  b.change = b.new_median_us / b.base_median_us - 1;
  b.processes_base = base.size();
  b.processes_new = now.size();
  b.n_base = before.times_us.size();
  b.n_new = after.times_us.size();
  const bool one_process = base.size() < 2 || now.size() < 2;
  b.spread = one_process ? std::max(relative_range(before.times_us), relative_range(after.times_us))
                         : std::max(relative_range(base), relative_range(now));
  b.allowance = std::max({o.threshold, kSpreadFactor * b.spread, one_process ? kOneProcessAllowance : 0.0});
  if (!after.fraction_of_ceiling.empty()) b.new_fraction_of_ceiling = median(after.fraction_of_ceiling);
  const bool separated = b.change > 0 ? *std::min_element(now.begin(), now.end()) > *std::max_element(base.begin(), base.end())
                                      : *std::max_element(now.begin(), now.end()) < *std::min_element(base.begin(), base.end());
  const bool large_enough = std::fabs(b.new_median_us - b.base_median_us) > o.min_change_us;
  if (b.n_base < kMinRepetitions || b.n_new < kMinRepetitions) b.verdict = Verdict::too_few;
  else if (std::fabs(b.change) > b.allowance && separated && large_enough)
    b.verdict = b.change > 0 ? Verdict::slower : Verdict::faster;
  else if (std::fabs(b.change) > o.threshold) b.verdict = Verdict::noisy;
  else b.verdict = Verdict::unchanged;
  return b;
}

}  // namespace

bool Comparison::any_slower() const { return count(Verdict::slower) > 0; }

size_t Comparison::count(Verdict v) const {
  return std::count_if(benchmarks.begin(), benchmarks.end(), [v](const auto& b) { return b.verdict == v; });
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
    c.benchmarks.push_back(compare_benchmark(name, it->second, samples, options));
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
                    {"new_median_us", b.new_median_us}, {"change", b.change}, {"spread", b.spread},
                    {"allowance", b.allowance}, {"processes_base", b.processes_base},
                    {"processes_new", b.processes_new}, {"n_base", b.n_base}, {"n_new", b.n_new},
                    {"new_fraction_of_ceiling", b.new_fraction_of_ceiling ? nlohmann::json(*b.new_fraction_of_ceiling)
                                                                          : nlohmann::json()}});
  return {{"base", c.base_label}, {"new", c.new_label}, {"threshold", c.options.threshold},
          {"min_change_us", c.options.min_change_us},
          {"rule", kVerdictRule}, {"slower", c.any_slower()},
          {"benchmarks", rows}, {"only_in_base", c.only_in_base}, {"only_in_new", c.only_in_new}};
}

}  // namespace dsv4h::report
