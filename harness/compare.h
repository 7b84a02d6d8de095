// Comparison of one output between two runs (reference vs GPU, GPU vs GPU, replay vs eager), with
// the statistics the results record and the worst elements a failure prints.
#pragma once

#include <string>
#include <vector>

#include "output_check.h"
#include "poison.h"
#include "tensor.h"

namespace dsv4h {

// What a wrong result's message holds (a comparison's summary, a model op over its budget):
// ci/check-mutant.py counts a failed test as a catch only where its message holds this mark.
inline constexpr char kMismatchMark[] = "MISMATCH";

// A failing element; under row_rel_l2 a failing row ("[3, :]": its norm and its error's norm, the
// relative error and its bound); under topk_set a failing row: the indices in each set only, with
// their scores, the largest distance of one from the boundary score and the score tolerance.
struct ElementMismatch {
  int64_t flat = 0;
  std::string index;  // e.g. "[3, 17]"
  std::string expected, got;
  double error = 0, allowed = 0;
};

struct OutputComparison {
  std::string output, dtype, tolerance, comparator;
  int64_t elements = 0;
  int64_t compared = 0;           // written by both sides
  int64_t unwritten = 0;          // left as poison by both sides (e.g. rows of filtered experts)
  int64_t write_mismatches = 0;   // written by one side only
  int64_t value_mismatches = 0;   // written by both, beyond the tolerance (row_rel_l2: rows; topk_set:
                                  // indices in one set only and not tied at the boundary)
  int64_t tied_swaps = 0;         // topk_set: indices of the got sets that replace one tied at the boundary
  int64_t nan_expected = 0, nan_got = 0, inf_got = 0;
  double max_abs_error = 0, max_rel_error = 0, rel_l2_error = 0, cosine = 1;
  double budget_used = 0;  // max over elements (rows) of error / allowed: headroom is 1 - this
  // Float outputs: over the elements finite on both sides, the share equal to the expected value
  // and the mean of (got - expected) in ulps (tolerance.h's distribution_ulp), against the class's
  // DistributionBound; not checked below its element count.
  int64_t distribution_elements = 0;
  double exact_agreement_rate = 1, mean_signed_error_ulps = 0;
  DistributionBound distribution_bound;
  bool distribution_checked = false, distribution_passed = true;
  std::vector<ElementMismatch> worst;
  bool passed() const { return write_mismatches == 0 && value_mismatches == 0 && distribution_passed; }
  std::string summary() const;  // one line; plus the worst elements when it failed
};

// Each tensor was filled with its poison before it was written; an element still holding it
// counts as unwritten, and both sides must agree on which elements were written. `check` is
// OutputCheck{} (exact, elementwise) for bitwise comparisons (integers, replay vs eager, poison a
// vs b). A topk_set check finds its scores tensor (rows as the output's, a score per candidate
// index) in `scores`, which holds the reference's tensors; its `tolerance` and `accumulated_terms`
// are the scores' (two scores within allowed_error of each other are tied).
OutputComparison compare_output(const std::string& name, const HostTensor& expected, Poison expected_poison,
                                const HostTensor& got, Poison got_poison, const OutputCheck& check,
                                const TensorMap* scores = nullptr);

std::string comparator_name(Comparator comparator);

// A value as the JSON dump shows it: "nan", "inf", "-inf" or the shortest round-trip decimal.
std::string format_value(double value);

}  // namespace dsv4h
