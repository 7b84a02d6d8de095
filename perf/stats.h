// Statistics for benchmark repetitions: medians, spread, the Mann-Whitney U test, and step
// detection over a history of nights.
#pragma once

#include <optional>
#include <vector>

namespace dsv4h::report {

double median(std::vector<double> values);

// Sample standard deviation / mean; 0 for fewer than two values.
double coefficient_of_variation(const std::vector<double>& values);

struct MannWhitney {
  double u;        // U of the first sample: pairs (a, b) with a > b, ties counting one half
  double p_value;  // two-sided
};

// Two-sided Mann-Whitney U test of "a and b come from the same distribution".
MannWhitney mann_whitney(const std::vector<double>& a, const std::vector<double>& b);

struct Step {
  size_t index;          // first night after the step
  double before_median;  // median of the nightly medians before it
  double after_median;   // ... and from it on
  double change;         // after / before - 1
  double p_value;
};

// The step change in a series of nightly medians, if there is one (rule in stats.cpp).
std::optional<Step> detect_step(const std::vector<double>& nightly_medians, double threshold, double alpha);

}  // namespace dsv4h::report
