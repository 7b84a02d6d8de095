// Comparing two nights benchmark by benchmark, by the medians of their processes, and a verdict.
//
// Repetitions inside one process understate the noise between processes: two H100 nights of
// identical kernels (reports/history/2026-12-05-4def3bf and -d977621) had 140 of 173 benchmarks
// at p < 0.05 by a Mann-Whitney test over repetitions, and their medians moved by up to 8.1%
// (decode-size kernels of ~2 us) while the repetitions of one process spanned 0.1 to 1%. So a
// night runs each benchmark binary in several processes (ci/nightly), and a change is judged
// against the spread between them. The rule (kVerdictRule), per benchmark:
//   value    the median of the process medians; change = new / base - 1
//   spread   the larger of the two nights' relative ranges of process medians, (max - min) / median
//   allowance = max(threshold, kSpreadFactor * spread)
//   slower   change > allowance and every new process median above every base one (faster alike)
// With 3 processes a side, complete separation alone happens by chance in 1 of 10 pairs (either
// way); with the allowance, simulated pairs of identical code (normal process noise) are flagged
// in about 1 of 200, while +10% on a kernel with the typical between-process noise of a ~2 us one
// (1.5%) is flagged in 97 of 100 (tests/cpu/test_report_compare.cpp holds the calibration).
// A night of one process (every night before the process tag) has no spread between processes:
// its spread is that of its repetitions, and the allowance is at least kOneProcessAllowance, the
// most that identical code moved between the two recorded H100 nights rounded up.
// Fewer than kMinRepetitions repetitions in either night leave no spread to judge by: too_few.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "history.h"

namespace dsv4h::report {

// In report order: regressions first.
enum class Verdict { slower, too_few, noisy, faster, unchanged };

std::string verdict_name(Verdict v);

// The verdict rule in one sentence, for --help and the reports.
extern const char* const kVerdictRule;

constexpr double kSpreadFactor = 1.5;
constexpr double kOneProcessAllowance = 0.10;
constexpr size_t kMinRepetitions = 3;

struct CompareOptions {
  double threshold = 0.03;  // relative change below which nothing is a change, however quiet
  // The step detection over the history (stats.h): the shift it must exceed, its significance level.
  double step_threshold = 0.05;
  double alpha = 0.05;
  // Absolute change that matters, an opt-in (0: off): a fixed floor such as the former 0.5 us hid
  // every regression of a decode-size kernel (+20% of a 2.2 us kernel is 0.44 us).
  double min_change_us = 0;
};

struct BenchmarkComparison {
  std::string name;
  Verdict verdict;
  double base_median_us, new_median_us;  // medians of the process medians
  double change;                         // new / base - 1
  double spread;                         // relative, as in the rule above
  double allowance;                      // the change needed for a verdict
  size_t processes_base, processes_new;
  size_t n_base, n_new;                  // repetitions
  std::optional<double> new_fraction_of_ceiling;  // median over the new night's repetitions
};

struct Comparison {
  std::string base_label, new_label;
  CompareOptions options;
  std::vector<BenchmarkComparison> benchmarks;  // in Verdict order
  std::vector<std::string> only_in_base, only_in_new;

  bool any_slower() const;
  size_t count(Verdict v) const;
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
