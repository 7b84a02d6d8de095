// Comparing two nights benchmark by benchmark: median change, Mann-Whitney U over the
// repetitions, and a verdict.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "history.h"

namespace dsv4h::report {

// In report order: regressions first.
enum class Verdict { slower, noisy, faster, unchanged };

std::string verdict_name(Verdict v);

// The verdict rule in one sentence, for --help and the reports.
extern const char* const kVerdictRule;

struct CompareOptions {
  double threshold = 0.05;  // relative median change that matters
  double alpha = 0.05;      // significance level of the Mann-Whitney test
  // Absolute median change that matters. Launch-bound benchmarks (an empty kernel, a decode-size
  // launch: 3.5 to 5 us) move by up to 1.2 us between processes on the lent H200 (empty kernel:
  // 3.49, 3.79, 4.43, 4.70 us in four processes of one day), which the test over one process's
  // repetitions takes as significant.
  double min_change_us = 1.5;
};

struct BenchmarkComparison {
  std::string name;
  Verdict verdict;
  double base_median_us, new_median_us;
  double change;  // new / base - 1 of the medians
  double p_value;
  double cv_base, cv_new;
  size_t n_base, n_new;
  std::optional<double> new_fraction_of_ceiling;  // median over the new night's repetitions
};

struct Comparison {
  std::string base_label, new_label;
  CompareOptions options;
  std::vector<BenchmarkComparison> benchmarks;  // regressions first, then noisy, faster, unchanged
  std::vector<std::string> only_in_base, only_in_new;

  bool any_slower() const;
};

Comparison compare_nights(const Night& base, const Night& now, const CompareOptions& options);

nlohmann::json comparison_to_json(const Comparison& c);

}  // namespace dsv4h::report
