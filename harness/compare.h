// Comparison of one output between two runs (reference vs GPU, GPU vs GPU, replay vs eager), with
// the statistics the results record and the worst elements a failure prints.
#pragma once

#include <string>
#include <vector>

#include "poison.h"
#include "tensor.h"
#include "tolerance.h"

namespace dsv4h {

struct ElementMismatch {
  int64_t flat = 0;
  std::string index;  // e.g. "[3, 17]"
  std::string expected, got;
  double error = 0, allowed = 0;
};

struct OutputComparison {
  std::string output, dtype, tolerance;
  int64_t elements = 0;
  int64_t compared = 0;           // written by both sides
  int64_t unwritten = 0;          // left as poison by both sides (e.g. rows of filtered experts)
  int64_t write_mismatches = 0;   // written by one side only
  int64_t value_mismatches = 0;   // written by both, beyond the tolerance
  int64_t nan_expected = 0, nan_got = 0, inf_got = 0;
  double max_abs_error = 0, max_rel_error = 0, rel_l2_error = 0, cosine = 1;
  double budget_used = 0;  // max over elements of error / allowed: headroom is 1 - this
  std::vector<ElementMismatch> worst;
  bool passed() const { return write_mismatches == 0 && value_mismatches == 0; }
  std::string summary() const;  // one line; plus the worst elements when it failed
};

// Each tensor was filled with its poison before it was written; an element still holding it
// counts as unwritten, and both sides must agree on which elements were written. `tolerance` is
// ToleranceClass::exact for bitwise comparisons (integers, replay vs eager, poison a vs b).
OutputComparison compare_output(const std::string& name, const HostTensor& expected, Poison expected_poison,
                                const HostTensor& got, Poison got_poison, ToleranceClass tolerance);

// A value as the JSON dump shows it: "nan", "inf", "-inf" or the shortest round-trip decimal.
std::string format_value(double value);

}  // namespace dsv4h
