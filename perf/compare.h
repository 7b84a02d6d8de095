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
  // Absolute median change that matters. Decode-size benchmarks move between processes more than
  // within one, which the test over one process's repetitions takes as significant: timed on the
  // device (behind a stream hold), the lent H200's empty kernel measured 1.27 to 1.48 us and
  // filtered_silu_mul at 6 rows 3.61 to 3.99 us in the processes of one day. (Timed at the host's
  // launch rate, in binaries before 9c6b223, the empty kernel moved by 1.2 us: 3.49 to 4.70 us.)
  double min_change_us = 0.5;
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

// BadInput where the two nights were timed differently (Night::timing) or ran on different cards
// (same_device).
Comparison compare_nights(const Night& base, const Night& now, const CompareOptions& options);

// Whether `report compare` may compare two files' times: the same device.name, or one of them
// names none (a bare Google Benchmark file). The lent machine is an H100 one night and an H200 the
// next, and their launch latencies and bandwidths differ by more than any threshold here.
bool same_device(const Night& a, const Night& b);

// How a night's benchmarks were timed, for messages: its context.timing quoted, or "absent (...)".
std::string timing_name(const Night& night);

nlohmann::json comparison_to_json(const Comparison& c);

}  // namespace dsv4h::report
