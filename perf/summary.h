// What the HTML and markdown reports show: the latest night against a baseline, and per
// benchmark its trend over the history and the step change found in it.
#pragma once

#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "compare.h"
#include "history.h"
#include "stats.h"

namespace dsv4h::report {

struct Trend {
  std::string name;
  std::vector<std::optional<double>> median_us;            // per night; empty where the night lacks it
  // Per night, the noise band: the lowest and highest process median (the lowest and highest
  // repetition in a night of one process), the spread report compare judges a change against.
  std::vector<std::optional<std::pair<double, double>>> band_us;
  std::vector<std::optional<double>> fraction_of_ceiling;  // per night; median over the repetitions
  std::optional<Step> step;                                // Step::index is a night index here
  std::string step_range;                                  // "after <night> up to <night>", or ""
};

struct HistorySummary {
  std::vector<Night> nights;  // oldest first, those timed as the latest night was, on its card
  // Earlier nights left out, their times not comparable with the latest night's:
  size_t nights_timed_otherwise = 0;  // timed otherwise (context.timing)
  size_t nights_on_other_cards = 0;   // timed alike, on a card of another device.name (or none)
  Night baseline;
  std::optional<size_t> baseline_index;  // where the baseline is in nights, if it is one of them
  Comparison comparison;                 // the latest night against the baseline
  std::vector<Trend> trends;             // in the comparison's order, then benchmarks not compared
};

// The history's nights timed as the latest was (Night::timing; a change of method would show as a
// step in every launch-bound trend) on its card (the same device.name; nights naming none are a
// series of their own). The baseline is `baseline_path` when given, else the night before the
// latest of those (where there is none, the latest night is its own baseline).
HistorySummary summarize_history(const std::string& dir, const std::string& baseline_path,
                                 const CompareOptions& options);

// Whether a benchmark measures the machine rather than a kernel of ours: the floors of
// tests/bench/floors/ (empty kernel, dependent loads, copy kernels) and the copy ceilings
// (BM_copy_same_bytes*, cudaMemcpy of a kernel's bytes), which the reports keep apart.
bool is_floor_or_ceiling(const std::string& benchmark);

// The sentences saying which earlier nights the report leaves out and why ("" where none).
std::string left_out_note(const HistorySummary& s);

// Number formats shared by the reports.
std::string format_change(double change);  // "+10.2%"
std::string format_time_us(double us);     // "12.3 us"

}  // namespace dsv4h::report
